package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/volrecon/volrecon/reconstruct"
)

// Volume is a pod's volume as the agent tracks it.
type Volume struct {
	PodUID, Name string
	// UniqueName is the kubelet's name of the volume
	// ("kubernetes.io/csi/<driver>^<handle>"), empty when unknown.
	UniqueName string
	// DeviceMountPath is the CSI staging path, where one applies.
	DeviceMountPath string
	// Why says why the state is what it is (for Uncertain: why not certain).
	Why string
}

// ActualState is what the agent knows of the node at start-up.
type ActualState struct {
	// Mounted volumes are mounted for their pods: the agent adopts them
	// instead of mounting them again.
	Mounted []Volume
	// Uncertain volumes may or may not be mounted (a hung NFS server, a
	// table that could not be read): the agent neither tears them down nor
	// counts them as mounted, and looks again later.
	Uncertain []Volume
	// InUse must not be detached from the node: what the agent reports in
	// node.status.volumesInUse.
	InUse []string
	// InUseByPod are the names of InUse each pod's volumes hold: a volume
	// may be detached once no pod holds it and no staging mount is left.
	InUseByPod map[string][]string
	// LeakedStaging are staging mounts that no pod uses: only the CSI
	// driver may unstage them (NodeUnstageVolume).
	LeakedStaging []string
	// Orphans are the pod dirs of pods that should not exist.
	Orphans []string
	// RunningOrphans are the orphans that may still run: evidence of life
	// was found, or none could be gathered (no LifeChecker). The agent
	// never cleans them up.
	RunningOrphans []string
}

// Rebuild scans the node and sorts what it finds. opts says where the node
// is, which pods should exist (reconstruct.Options.ActivePods) and how to
// tell whether an orphan still runs (Options.LifeChecker: liveness.New on
// a node, fakenode.Life in a test; without it every orphan may run). A
// scan that cannot be done at all (no kubelet root) is an error. A mount
// table that could not be read makes every volume Uncertain, never
// Unmounted: Rebuild returns that ActualState with the error
// (errors.Is(err, reconstruct.ErrMountTable)), and the agent looks again
// later before it mounts or unmounts anything.
func Rebuild(ctx context.Context, opts reconstruct.Options) (*ActualState, error) {
	st, err := reconstruct.Scan(ctx, opts)
	if err != nil && (st == nil || !errors.Is(err, reconstruct.ErrMountTable)) {
		return nil, fmt.Errorf("agent: rebuild the actual state: %w", err)
	}
	as := sortState(st)
	if err != nil {
		return as, fmt.Errorf("agent: rebuild the actual state: every volume is uncertain: %w", err)
	}
	return as, nil
}

// sortState sorts a State into what the agent does with each part.
func sortState(st *reconstruct.State) *ActualState {
	as := &ActualState{InUse: st.VolumesInUse, InUseByPod: st.VolumesInUseByPod()}
	track := func(v reconstruct.Volume) Volume {
		return Volume{PodUID: v.PodUID, Name: v.Name, UniqueName: v.UniqueName, DeviceMountPath: v.DeviceMountPath, Why: v.Reason}
	}
	for _, p := range st.Pods {
		for _, v := range st.MountedVolumes(p.UID) {
			as.Mounted = append(as.Mounted, track(v))
		}
		if p.Status == reconstruct.PodOrphaned {
			as.Orphans = append(as.Orphans, p.UID)
		}
	}
	for _, v := range st.Volumes {
		if v.State == reconstruct.Uncertain {
			as.Uncertain = append(as.Uncertain, track(v))
		}
	}
	for _, g := range st.LeakedGlobalMounts() {
		as.LeakedStaging = append(as.LeakedStaging, g.Path)
	}
	for _, f := range st.Findings {
		if f.Kind == reconstruct.OrphanedPodRunning {
			as.RunningOrphans = append(as.RunningOrphans, f.PodUID)
		}
	}
	return as
}
