package reconstruct

import (
	"strings"

	"github.com/volrecon/volrecon/podsdir"
)

// noteHungPaths handles what the disk scan could not read because a call
// hung (a hung NFS or FUSE mount on a dir it lists, or on a vol_data.json):
// each such path is a HungMount; a volume at, above or below it is
// Uncertain; its pod is Unknown, so that nothing of it is ever planned for
// cleanup; and a vol_data.json that was not read is not reported corrupt.
// It runs once the active pods are known, before anything uses the states.
func (b *builder) noteHungPaths() {
	var paths []string
	pods := map[string]bool{}
	for _, p := range b.inv.Problems {
		if p.Kind != podsdir.ProblemHung {
			continue
		}
		paths = append(paths, p.Path)
		if p.PodUID != "" {
			pods[p.PodUID] = true
		}
		b.add(Finding{Kind: HungMount, Severity: SeverityCritical, Path: p.Path, PodUID: p.PodUID,
			Message: "the scan could not read it: " + p.Message + "; what lies below is unknown, and nothing of its pod is cleaned up"})
	}
	if len(paths) == 0 {
		return
	}
	for i := range b.st.Pods {
		if pod := &b.st.Pods[i]; pods[pod.UID] {
			pod.Status = PodUnknown
			b.log.V(4).Info("Pod status", "podUID", pod.UID, "status", pod.Status, "reason", "a path of it hung")
		}
	}
	for i := range b.st.Volumes {
		v := &b.st.Volumes[i]
		if p, ok := related(paths, v.Path, v.CheckedPath); ok {
			v.State, v.Reason = Uncertain, "the scan could not read "+p+" (hung mount?)"
		}
	}
	kept := b.st.Findings[:0]
	for _, f := range b.st.Findings {
		if _, ok := related(paths, f.Path); ok && (f.Kind == CorruptVolumeData || f.Kind == MissingVolumeData) {
			continue // not read, so neither corrupt nor missing
		}
		kept = append(kept, f)
	}
	b.st.Findings = kept
}

// related returns the first of paths that is at, above or below one of ps.
func related(paths []string, ps ...string) (string, bool) {
	for _, h := range paths {
		for _, p := range ps {
			if p != "" && (within(p, h) || within(h, p)) {
				return h, true
			}
		}
	}
	return "", false
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/"
}
