package reconstruct

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/progress"
)

// probeMounts stats every mount point under the pods dir (volumes,
// subpaths, mounts nested in volumes) and every mounted staging path, each
// bounded by the probe timeout. A broken mount stays Mounted (it is still in
// the table, and must be unmounted); a hung one makes its volume Uncertain.
func (b *builder) probeMounts() {
	results := b.runProbes(b.probeTargets())
	handled := map[string]bool{}
	for i := range b.st.Volumes {
		v := &b.st.Volumes[i]
		if r, ok := results[v.CheckedPath]; ok && !handled[v.CheckedPath] {
			handled[v.CheckedPath] = true
			v.State, v.Reason = b.applyProbe(r, v.CheckedPath, v.PodUID, v.Name, v.State, v.Reason)
		}
	}
	for _, g := range b.globals {
		if r, ok := results[g.Path]; ok && !handled[g.Path] {
			handled[g.Path] = true
			g.State, g.Reason = b.applyProbe(r, g.Path, "", g.VolumeHandle, g.State, g.Reason)
		}
	}
	for p, r := range results {
		if !handled[p] {
			uid, _ := b.podUIDFromPath(p)
			b.applyProbe(r, p, uid, "", Mounted, "")
		}
	}
	for i := range b.st.Volumes {
		if v := &b.st.Volumes[i]; v.DeviceMountPath != "" && b.globals[v.DeviceMountPath] != nil {
			v.DeviceMountState = b.deviceMountState(b.globals[v.DeviceMountPath])
		}
	}
}

func (b *builder) probeTargets() []string {
	var paths []string
	for _, v := range b.st.Volumes {
		if v.State == Mounted {
			paths = append(paths, v.CheckedPath)
		}
	}
	for _, g := range b.globals {
		if g.State == Mounted && g.Mode == podsdir.Filesystem {
			paths = append(paths, g.Path)
		}
	}
	if b.consistent && b.inv.PodsDir != "" {
		for _, mp := range b.table.MountPointsAtOrBelow(b.inv.PodsDir) {
			if mp != b.inv.PodsDir {
				paths = append(paths, mp)
			}
		}
	}
	return paths
}

func (b *builder) runProbes(paths []string) map[string]probeResult {
	prober := b.opts.Prober
	if prober == nil {
		prober = statProbe
	}
	pdo := b.opts.podsdirOptions()
	paths = slices.Compact(slices.Sorted(slices.Values(paths))) // probeAll probes each once
	total := len(paths)
	var done atomic.Int64
	return probeAll(paths, b.opts.ProbeConcurrency, func(p string) probeResult {
		hostPath := pdo.HostPath(p)
		b.opts.Progress.Send(progress.Report{Step: "probing mounts", Done: int(done.Load()), Total: total, Item: p})
		r := probe(b.ctx, hostPath, b.opts.ProbeTimeout, prober)
		b.opts.Progress.Send(progress.Report{Step: "probing mounts", Done: int(done.Add(1)), Total: total, Item: p})
		return r
	})
}

func (b *builder) applyProbe(r probeResult, p, podUID, volume string, state VolumeState, reason string) (VolumeState, string) {
	switch {
	case r.hung && r.err != nil: // the scan itself was cancelled
		return Uncertain, reason + "; probe cancelled: " + r.err.Error()
	case r.hung:
		b.add(Finding{Kind: HungMount, Path: p, PodUID: podUID, Volume: volume,
			Message: "stat did not return within " + b.opts.ProbeTimeout.String() + ": the mount hangs (NFS server or FUSE daemon gone?)"})
		return Uncertain, reason + "; stat hung for " + b.opts.ProbeTimeout.String()
	case isCorrupted(r.err):
		b.add(Finding{Kind: CorruptedMount, Path: p, PodUID: podUID, Volume: volume,
			Message: "the mount is broken (" + r.err.Error() + "): it is still mounted and must be unmounted before anything below it is touched"})
		return state, reason + "; probe: " + r.err.Error()
	case r.err != nil:
		return state, reason + "; probe: " + r.err.Error()
	}
	return state, reason
}

// noteProblems turns what the disk scan found out of place into findings.
func (b *builder) noteProblems() {
	for _, p := range b.inv.Problems {
		if p.Kind == podsdir.ProblemHung {
			continue // a HungMount (noteHungPaths)
		}
		b.add(Finding{Kind: UnexpectedEntry, Path: p.Path, PodUID: p.PodUID,
			Message: string(p.Kind) + ": " + p.Message})
	}
}

// noteStackedMounts reports paths with more than one mount on top of each
// other, under the pods dir and the CSI dir: unmounting once is not enough.
func (b *builder) noteStackedMounts() {
	if !b.consistent {
		return
	}
	for _, dir := range []string{b.inv.PodsDir, b.inv.CSIDir} {
		if dir == "" {
			continue
		}
		for _, mp := range b.table.MountPointsAtOrBelow(dir) {
			stack := b.mounts.at(mp)
			if len(stack) < 2 || mp == dir { // a self-bound pods dir is not a volume
				continue
			}
			uid, _ := b.podUIDFromPath(mp)
			b.add(Finding{Kind: StackedMount, Path: mp, PodUID: uid,
				Message: plural(len(stack), "mount", "mounts") + " stacked on one path: one unmount leaves the next one in place"})
		}
	}
}

// collectVolumesInUse lists the attachable volumes that must not be
// detached: their pod mount or staging mount is Mounted or Uncertain. Like
// the kubelet (volume_manager.go GetVolumesInUse keeps only volumes whose
// plugin is attachable), it leaves out projected, secret, configMap,
// emptyDir, NFS, local, CSI inline and attach-free CSI volumes, and
// anything without a unique name.
func (b *builder) collectVolumesInUse() {
	var names []string
	for _, v := range b.st.Volumes {
		if holdsAttachment(v) {
			names = append(names, v.UniqueName)
		}
	}
	for _, g := range b.st.GlobalMounts {
		if g.Attachable && held(g.State) {
			names = append(names, g.UniqueName)
		}
	}
	slices.Sort(names)
	b.st.VolumesInUse = slices.Compact(names)
}

func (s *State) sort() {
	slices.SortFunc(s.Pods, func(a, b Pod) int { return cmp.Compare(a.UID, b.UID) })
	slices.SortFunc(s.Volumes, func(a, b Volume) int {
		return cmp.Or(cmp.Compare(a.PodUID, b.PodUID), cmp.Compare(a.Mode, b.Mode), cmp.Compare(a.Plugin, b.Plugin), cmp.Compare(a.Name, b.Name))
	})
	slices.SortFunc(s.GlobalMounts, func(a, b GlobalMount) int { return cmp.Compare(a.Path, b.Path) })
	slices.SortFunc(s.LoopDevices, func(a, b LoopDevice) int { return cmp.Compare(a.Device, b.Device) })
	slices.SortFunc(s.Findings, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Path, b.Path), cmp.Compare(a.PodUID, b.PodUID), cmp.Compare(a.Volume, b.Volume))
	})
}
