package nodewatch

import "github.com/volrecon/volrecon/kubelet"

// childKind returns the kind of the subdir name of a dir of kind k, and
// whether it is watched. Only the dirs the scan lists, and the dirs that
// hold them, are watched (the dirs of the layout, kubelet.Kind): never a
// volume's own dir (a mount point, or a plain dir of user data such as an
// emptyDir), never below it.
func childKind(k kubelet.Kind, name string) (kubelet.Kind, bool) {
	c := k.Child(name)
	return c, c != kubelet.KindNone
}

// isTop reports whether a dir of kind k is one whose loss (deleted,
// replaced, unmounted) calls for setting the watches up again.
func isTop(k kubelet.Kind) bool {
	return k == kubelet.KindRoot || k == kubelet.KindPods || k == kubelet.KindPlugins || k == kubelet.KindRegistry
}
