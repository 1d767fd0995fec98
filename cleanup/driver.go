package cleanup

import (
	"cmp"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// driverRegistered says whether the CSI driver may be registered with the
// kubelet on this node, as the scan tells it (podsdir.DriverRegistered:
// its socket plugins/<driver>/csi.sock exists, or an entry of
// plugins_registry/ is named after it). When that cannot be told it says
// yes, so a leftover vol_data.json is kept for the driver. Every call is
// bounded, and nothing is sent into a mount of the plan's table that may
// hang where the kubelet's layout has none.
func (p *podPlanner) driverRegistered(driver string) bool {
	root := cmp.Or(p.st.ResolvedRootDir, p.st.RootDir)
	opts := podsdir.Options{RootDir: root, HostRoot: p.opts.HostRoot}
	if p.snap != nil {
		opts.NotEntered = p.snap.notToEnter(root, p.st.PodsDir)
	}
	return podsdir.DriverRegistered(p.ctx, opts, driver)
}

// notToEnter returns the mounts of the snapshot's table that nothing may
// be sent into, found once per plan.
func (s *snapshot) notToEnter(root, podsDir string) map[string]string {
	if s.fenced == nil {
		s.fenced = reconstruct.MountsNotToEnter(s.table, root, podsDir, kubelet.Root(root).PluginsDir())
	}
	return s.fenced
}
