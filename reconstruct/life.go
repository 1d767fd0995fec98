package reconstruct

import (
	"context"
	"fmt"
	"strings"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/progress"
)

// LifeChecker looks for evidence that orphaned pods still run, which the
// host's mount table cannot show: a container's mount namespace holding a
// bind from the pod dir, or the container runtime listing the pod's
// sandbox or containers. Package liveness implements it;
// Scan asks it through Options.LifeChecker so that reconstruct itself never
// talks to a runtime.
type LifeChecker interface {
	// CheckLife answers for each pod given (by UID). table is the host's mount
	// table, read consistently; when Scan read it, it holds only the entries
	// at, below and above the kubelet's dirs, and those at or below /dev
	// (mountscan.Scope), which is all Containing needs for a pod dir. pods
	// are host paths.
	CheckLife(ctx context.Context, table *mountscan.Table, pods []PodRef) map[string]LifeSigns
}

// PodRef names a pod dir.
type PodRef struct {
	UID  string
	Path string // host path of the pod dir
}

// LifeSigns is what a LifeChecker found for one pod.
type LifeSigns struct {
	// Evidence says what shows the pod still runs, for a person to check.
	Evidence []string
	// Unknown says why evidence could not be gathered. Unknown is not "gone":
	// the pod is treated as running.
	Unknown string
}

// Running: the pod runs, or whether it runs is unknown.
func (l LifeSigns) Running() bool { return len(l.Evidence) > 0 || l.Unknown != "" }

// lifeNotGathered is why the life of every orphan is unknown
// when Scan has no Options.LifeChecker (and AssumeOrphansDead is unset).
const lifeNotGathered = "no evidence of life was gathered (Options.LifeChecker is nil): " +
	"pass one (liveness.New), or set Options.AssumeOrphansDead if no pod can run here"

// lifeOfOrphans asks Options.LifeChecker about every orphan: those with
// mounts on the host too, since every running pod has some (its service
// account token's tmpfs), and a plan that may unmount them would then
// remove its emptyDir data. A pod it does not answer for is unknown, and
// so is every pod when there is no LifeChecker, unless the caller assumes
// orphans dead.
func (b *builder) lifeOfOrphans() map[string]LifeSigns {
	if !b.consistent {
		return nil
	}
	var pods []PodRef
	for _, p := range b.st.Pods {
		if p.Status == PodOrphaned {
			pods = append(pods, PodRef{UID: p.UID, Path: p.Path})
		}
	}
	if len(pods) == 0 {
		return nil
	}
	if b.opts.LifeChecker == nil {
		return b.noEvidenceOfLife(pods)
	}
	b.opts.Progress.Send(progress.Report{Step: "looking for evidence of life of the orphans", Total: len(pods)})
	signs := b.opts.LifeChecker.CheckLife(b.ctx, b.table, pods)
	out := make(map[string]LifeSigns, len(pods))
	for _, p := range pods {
		s, ok := signs[p.UID]
		if !ok {
			s.Unknown = "the life checker gave no answer for this pod"
		}
		out[p.UID] = s
		b.log.V(4).Info("Evidence of life", "podUID", p.UID, "evidence", s.Evidence, "unknown", s.Unknown)
	}
	return out
}

// noEvidenceOfLife is the life of pods when no LifeChecker is given: unknown,
// or, when the caller assumes orphans dead, not asked (nil).
func (b *builder) noEvidenceOfLife(pods []PodRef) map[string]LifeSigns {
	if b.opts.AssumeOrphansDead {
		b.log.V(4).Info("No evidence of life gathered: orphans assumed dead (Options.AssumeOrphansDead)", "orphans", len(pods))
		return nil
	}
	out := make(map[string]LifeSigns, len(pods))
	for _, p := range pods {
		out[p.UID] = LifeSigns{Unknown: lifeNotGathered}
		b.log.V(4).Info("Evidence of life", "podUID", p.UID, "unknown", lifeNotGathered)
	}
	return out
}

// lifeUnknownMessage begins the message of an OrphanedPodRunning finding
// of a pod whose evidence of life could not be gathered (LifeUnknown).
const lifeUnknownMessage = "orphaned pod whose evidence of life could not be gathered ("

// LifeUnknown says whether f is the OrphanedPodRunning finding of an
// orphan whose evidence of life could not be gathered, or was not: it may
// as well be dead (and then OrphanedPodMounted, OrphanedPodNeedsDriver,
// OrphanedPodKept or OrphanedPodRemovable), which nothing tells.
func LifeUnknown(f Finding) bool {
	return f.Kind == OrphanedPodRunning && strings.HasPrefix(f.Message, lifeUnknownMessage)
}

// runningFinding reports an orphan that still runs, or may.
func runningFinding(p Pod, s LifeSigns) Finding {
	msg := "orphaned pod that still runs (" + summarize(s.Evidence, 3) + ")"
	if len(s.Evidence) == 0 {
		msg = lifeUnknownMessage + s.Unknown + "): unknown keeps the pod, treated as running"
	}
	return Finding{Kind: OrphanedPodRunning, Path: p.Path, PodUID: p.UID,
		Message: fmt.Sprintf("%s: not removable; nothing of it is cleaned while its containers may run. "+
			"Check that the active pod list is current; the pod may have been scheduled after it was taken, or the kubelet lost track of it",
			strings.TrimSpace(msg))}
}
