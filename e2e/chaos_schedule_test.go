package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The chaos run's schedule (issue 22): every decision of a run is drawn
// here, from the seed alone, before the run starts, so that a seed replays
// the same cycles, pods and faults exactly (only timing differs). The
// schedule keeps its own model of which pods exist; it never looks at the
// node.

// Fault kinds.
const (
	faultKubeletKill       = "kubelet-kill"        // SIGKILL or SIGTERM, maybe with a CSI call in flight
	faultDriverRestart     = "driver-restart"      // the CSI driver killed and restarted, maybe mid-call
	faultContainerdRestart = "containerd-restart"  // containerd stopped and started
	faultReboot            = "reboot"              // everything killed, mounts and loop devices gone
	faultAPIServerDown     = "apiserver-down"      // the API server stopped for a while
	faultVolDataDamage     = "vol-data-damage"     // a vol_data.json deleted or truncated
	faultForceDeleteDown   = "force-delete-down"   // pods deleted or force-deleted while the kubelet is down
	faultNone              = "none"                // a quiet cycle
	inFlightNone           = ""                    // no CSI call held
	damageDelete           = "delete"              // vol_data.json removed
	damageTruncate         = "truncate"            // vol_data.json cut short
	chaosMaxPods           = 4                     // pods alive at once
	chaosPVs               = 2                     // filesystem PVs in the pool
	chaosBlockPVs          = 1                     // block PVs in the pool
	chaosBlockSlots        = 4096                  // 4 KiB marker slots of a 16 MiB block volume
	chaosStartPerCycleMax  = 2                     // pods started per cycle, at most
	chaosDeletePerCycleMax = 2                     // pods deleted per cycle, at most
	chaosAPIDownMaxSeconds = 20                    // the API server's longest outage
	chaosMethodsHeldStart  = "NodeStageVolume"     // held while a pod starts
	chaosMethodsHeldPub    = "NodePublishVolume"   // held while a pod starts
	chaosMethodsHeldUnpub  = "NodeUnpublishVolume" // held while a pod goes
	chaosMethodsHeldUnst   = "NodeUnstageVolume"   // held while a pod goes
)

// chaosPod is one workload pod: its name, the filesystem PV it claims,
// and the block PV (or "") with its marker slot.
type chaosPod struct {
	Name      string `json:"name"`
	FSClaim   string `json:"fsClaim"`
	OwnPV     bool   `json:"ownPV,omitempty"` // FSClaim is made for this pod
	Block     string `json:"block,omitempty"`
	BlockSlot int    `json:"blockSlot,omitempty"`
}

// chaosFault is one fault of a cycle.
type chaosFault struct {
	Kind string `json:"kind"`
	// Signal for faultKubeletKill: "SIGKILL" or "SIGTERM".
	Signal string `json:"signal,omitempty"`
	// InFlight: the CSI method held in flight when the kubelet or the
	// driver is killed (inFlightNone: none); Abort: the held call then
	// fails without doing anything (a driver that honours its caller's
	// going away), else it completes after the kill.
	InFlight string `json:"inFlight,omitempty"`
	Abort    bool   `json:"abort,omitempty"`
	// KubeletDown: the vol_data.json is damaged while the kubelet is down
	// (killed with Signal), and Delete or ForceDelete name its pod when
	// that pod is deleted meanwhile.
	KubeletDown bool `json:"kubeletDown,omitempty"`
	// Seconds: how long the API server stays down, or the kubelet.
	Seconds int `json:"seconds,omitempty"`
	// Damage for faultVolDataDamage, of the vol_data.json of Pod's CSI
	// Volume ("fs": its PVC's, "eph": its inline ephemeral volume's).
	Damage string `json:"damage,omitempty"`
	Pod    string `json:"pod,omitempty"`
	Volume string `json:"volume,omitempty"`
	// Delete and ForceDelete: pods deleted while the kubelet is down.
	Delete      []string `json:"delete,omitempty"`
	ForceDelete []string `json:"forceDelete,omitempty"`
}

// chaosCycle is one cycle: pods started and deleted (gracefully or
// forced) while the faults are applied; Paused: the remediation runs
// with the kubelet paused (SIGSTOP), so that every change on the node
// in that window is volrecon's and can be checked against its report.
type chaosCycle struct {
	N           int          `json:"n"`
	Start       []chaosPod   `json:"start,omitempty"`
	Delete      []string     `json:"delete,omitempty"`
	ForceDelete []string     `json:"forceDelete,omitempty"`
	Faults      []chaosFault `json:"faults"`
	Paused      bool         `json:"paused"`
}

type chaosSchedule struct {
	Seed   uint64       `json:"seed"`
	Cycles []chaosCycle `json:"cycles"`
}

// scheduleFor draws a schedule of n cycles from the seed.
func scheduleFor(seed uint64, n int) chaosSchedule {
	g := &scheduler{rng: rand.New(rand.NewPCG(seed, seed^0x766f6c7265636f6e)), alive: map[string]bool{}}
	s := chaosSchedule{Seed: seed}
	for i := 1; i <= n; i++ {
		s.Cycles = append(s.Cycles, g.cycle(i))
	}
	return s
}

type scheduler struct {
	rng     *rand.Rand
	alive   map[string]bool // pods the schedule created and has not deleted
	started int
}

func (g *scheduler) cycle(n int) chaosCycle {
	c := chaosCycle{N: n, Paused: g.rng.IntN(2) == 0}
	c.Delete, c.ForceDelete = g.pickDeletes(chaosDeletePerCycleMax)
	for range g.rng.IntN(chaosStartPerCycleMax + 1) {
		if len(g.alive) >= chaosMaxPods {
			break
		}
		c.Start = append(c.Start, g.newPod())
	}
	c.Faults = g.faults(c)
	return c
}

// pickDeletes chooses up to max alive pods to delete, each gracefully or
// forced, and drops them from the model.
func (g *scheduler) pickDeletes(max int) (graceful, forced []string) {
	names := g.aliveNames()
	g.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	for _, name := range names[:min(len(names), g.rng.IntN(max+1))] {
		delete(g.alive, name)
		if g.rng.IntN(3) == 0 {
			forced = append(forced, name)
		} else {
			graceful = append(graceful, name)
		}
	}
	return graceful, forced
}

// deletePod drops a pod from the model: its name, or none if "".
func (g *scheduler) deletePod(name string) []string {
	if name == "" {
		return nil
	}
	delete(g.alive, name)
	return []string{name}
}

// aliveBefore: the alive pods that the cycle did not start.
func (g *scheduler) aliveBefore(c chaosCycle) []string {
	var out []string
	for _, name := range g.aliveNames() {
		if !slices.ContainsFunc(c.Start, func(p chaosPod) bool { return p.Name == name }) {
			out = append(out, name)
		}
	}
	return out
}

func (g *scheduler) aliveNames() []string {
	var names []string
	for name := range g.alive {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (g *scheduler) newPod() chaosPod {
	g.started++
	// Half the pods share the pool's PVs; the others claim a PV of their
	// own, which no later pod stages again (a leak of it is for good).
	p := chaosPod{Name: fmt.Sprintf("chaos-%03d", g.started), FSClaim: chaosFSPV(g.rng.IntN(chaosPVs))}
	if g.rng.IntN(2) == 0 {
		p.FSClaim, p.OwnPV = chaosOwnPV(g.started), true
	}
	if g.rng.IntN(3) == 0 {
		p.Block, p.BlockSlot = chaosBlockPV(g.rng.IntN(chaosBlockPVs)), g.started%chaosBlockSlots
	}
	g.alive[p.Name] = true
	return p
}

func chaosFSPV(i int) string    { return fmt.Sprintf("chaos-fs-%d", i) }
func chaosBlockPV(i int) string { return fmt.Sprintf("chaos-blk-%d", i) }
func chaosOwnPV(n int) string   { return fmt.Sprintf("chaos-pv-%03d", n) }

// faults draws the cycle's faults: mostly one, sometimes two, sometimes
// none. A call can be held in flight only when the cycle starts a pod
// (NodeStage, NodePublish) or deletes one (NodeUnpublish, NodeUnstage).
func (g *scheduler) faults(c chaosCycle) []chaosFault {
	count := []int{0, 1, 1, 1, 2, 2}[g.rng.IntN(6)]
	if count == 0 {
		return []chaosFault{{Kind: faultNone}}
	}
	var out []chaosFault
	for range count {
		out = append(out, g.fault(c))
	}
	return out
}

var chaosFaultKinds = []string{
	faultKubeletKill, faultKubeletKill, faultKubeletKill, faultForceDeleteDown, faultForceDeleteDown,
	faultDriverRestart, faultContainerdRestart, faultReboot, faultAPIServerDown, faultVolDataDamage,
}

func (g *scheduler) fault(c chaosCycle) chaosFault {
	f := chaosFault{Kind: chaosFaultKinds[g.rng.IntN(len(chaosFaultKinds))]}
	switch f.Kind {
	case faultKubeletKill:
		f.Signal = []string{"SIGKILL", "SIGTERM"}[g.rng.IntN(2)]
		f.InFlight = g.inFlight(c)
		f.Abort = f.InFlight != inFlightNone && g.rng.IntN(2) == 0
		f.Seconds = 1 + g.rng.IntN(5)
	case faultDriverRestart:
		f.InFlight = g.inFlight(c)
	case faultAPIServerDown:
		f.Seconds = 3 + g.rng.IntN(chaosAPIDownMaxSeconds-2)
	case faultVolDataDamage:
		f.Damage = []string{damageDelete, damageTruncate}[g.rng.IntN(2)]
		f.Volume = []string{"fs", "eph"}[g.rng.IntN(2)]
		// A pod of an earlier cycle: this cycle's may not have its
		// volumes yet.
		if names := g.aliveBefore(c); len(names) > 0 {
			f.Pod = names[g.rng.IntN(len(names))]
		}
		if f.KubeletDown = g.rng.IntN(2) == 0; f.KubeletDown {
			f.Signal = "SIGKILL"
			f.Seconds = 1 + g.rng.IntN(3)
			switch g.rng.IntN(3) {
			case 1:
				f.Delete = g.deletePod(f.Pod)
			case 2:
				f.ForceDelete = g.deletePod(f.Pod)
			}
		}
	case faultForceDeleteDown:
		f.Signal = []string{"SIGKILL", "SIGTERM"}[g.rng.IntN(2)]
		f.Delete, f.ForceDelete = g.pickDeletes(2)
		f.Seconds = 1 + g.rng.IntN(5)
	}
	return f
}

func (g *scheduler) inFlight(c chaosCycle) string {
	var choices []string
	if len(c.Start) > 0 {
		choices = append(choices, chaosMethodsHeldStart, chaosMethodsHeldPub)
	}
	if len(c.Delete)+len(c.ForceDelete) > 0 {
		choices = append(choices, chaosMethodsHeldUnpub, chaosMethodsHeldUnst)
	}
	choices = append(choices, inFlightNone)
	return choices[g.rng.IntN(len(choices))]
}

// String is the cycle in one line, for the run's log and a failure's
// "schedule so far".
func (c chaosCycle) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cycle %d:", c.N)
	for _, p := range c.Start {
		fmt.Fprintf(&b, " start %s(%s", p.Name, p.FSClaim)
		if p.Block != "" {
			fmt.Fprintf(&b, ",%s", p.Block)
		}
		b.WriteString(")")
	}
	for _, p := range c.Delete {
		fmt.Fprintf(&b, " delete %s", p)
	}
	for _, p := range c.ForceDelete {
		fmt.Fprintf(&b, " force-delete %s", p)
	}
	for _, f := range c.Faults {
		fmt.Fprintf(&b, " | %s", f)
	}
	if c.Paused {
		b.WriteString(" | remediation with the kubelet paused")
	}
	return b.String()
}

func (f chaosFault) String() string {
	parts := []string{f.Kind}
	if f.Signal != "" {
		parts = append(parts, f.Signal)
	}
	if f.InFlight != "" {
		parts = append(parts, "during "+f.InFlight)
		if f.Abort {
			parts = append(parts, "(aborted)")
		}
	}
	if f.KubeletDown {
		parts = append(parts, "with the kubelet down")
	}
	if f.Seconds > 0 {
		parts = append(parts, fmt.Sprintf("%ds", f.Seconds))
	}
	if f.Damage != "" {
		parts = append(parts, fmt.Sprintf("%s %s/%s", f.Damage, f.Pod, f.Volume))
	}
	for _, p := range f.Delete {
		parts = append(parts, "delete "+p)
	}
	for _, p := range f.ForceDelete {
		parts = append(parts, "force-delete "+p)
	}
	return strings.Join(parts, " ")
}

// TestChaosScheduleReplays: a seed gives the same schedule every time,
// another seed another one, and the schedule keeps to its bounds. Pure:
// no cluster, no root.
func TestChaosScheduleReplays(t *testing.T) {
	a, b := scheduleFor(42, 200), scheduleFor(42, 200)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, scheduleFor(43, 200))
	kinds := map[string]int{}
	alive := map[string]bool{}
	remove := func(c chaosCycle, names []string) {
		for _, p := range names {
			assert.True(t, alive[p], "cycle %d deletes %s, which is not alive", c.N, p)
			delete(alive, p)
		}
	}
	for _, c := range a.Cycles {
		remove(c, append(append([]string{}, c.Delete...), c.ForceDelete...))
		for _, p := range c.Start {
			alive[p.Name] = true
		}
		assert.LessOrEqual(t, len(alive), chaosMaxPods, "cycle %d", c.N)
		for _, f := range c.Faults {
			kinds[f.Kind]++
			remove(c, append(append([]string{}, f.Delete...), f.ForceDelete...))
		}
	}
	for _, k := range []string{faultKubeletKill, faultDriverRestart, faultContainerdRestart, faultReboot, faultAPIServerDown, faultVolDataDamage, faultForceDeleteDown, faultNone} {
		assert.Positive(t, kinds[k], "200 cycles draw %s", k)
	}
}
