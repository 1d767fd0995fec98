package cleanup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// Bounds of reading a reviewed plan: the JSON of a plan of thousands of
// orphans is a few MiB.
const (
	DefaultPlanMaxSize = 256 << 20
	DefaultPlanTimeout = 2 * time.Minute
)

// ErrNotAPlan: a reviewed plan's JSON is not a plan of this volrecon: not
// JSON, not an ActionPlan (a State, the output of cleanup), or one with
// fields or action kinds this volrecon does not know.
var ErrNotAPlan = errors.New("not the JSON of volrecon plan -o json")

// PlanError is a reviewed plan that could not be read or taken.
type PlanError struct {
	Path string
	Err  error
}

func (e *PlanError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *PlanError) Unwrap() error { return e.Err }

// ReadPlanFile reads and parses the plan at path (ParsePlan), within
// DefaultPlanMaxSize and DefaultPlanTimeout.
func ReadPlanFile(ctx context.Context, path string) (*ActionPlan, error) {
	data, err := bounded.ReadFile(ctx, path, DefaultPlanMaxSize, DefaultPlanTimeout)
	if err != nil {
		return nil, &PlanError{Path: path, Err: err}
	}
	return ParsePlan(path, data)
}

// ParsePlan parses the JSON of a plan a person reviewed (`volrecon plan -o
// json`, an ActionPlan), strictly: one JSON object of schema volrecon.v1,
// no field and no action kind this volrecon does not know. The schema
// lets later versions add fields, and one may carry a condition this
// version cannot check: such a plan is refused, never read in part. name
// names the plan in errors.
func ParsePlan(name string, data []byte) (*ActionPlan, error) {
	fail := func(err error) (*ActionPlan, error) { return nil, &PlanError{Path: name, Err: err} }
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var plan ActionPlan
	if err := dec.Decode(&plan); err != nil {
		return fail(fmt.Errorf("%w (a State, the output of cleanup, or a plan of a newer volrecon?): %w", ErrNotAPlan, err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fail(fmt.Errorf("%w: more than one JSON value", ErrNotAPlan))
	}
	switch {
	case plan.SchemaVersion != reconstruct.SchemaVersion:
		return fail(fmt.Errorf("%w: schemaVersion %q, want %q", ErrNotAPlan, plan.SchemaVersion, reconstruct.SchemaVersion))
	case plan.Actions == nil:
		return fail(fmt.Errorf("%w: no actions list", ErrNotAPlan))
	}
	for i, a := range plan.Actions {
		if !slices.Contains(ActionKinds(), a.Action) {
			return fail(fmt.Errorf("%w: actions[%d] is of kind %q", ErrNotAPlan, i, a.Action))
		}
		for _, p := range append([]string{a.Path}, a.MustBeUnmounted...) {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				return fail(fmt.Errorf("%w: actions[%d] names %q, not a clean absolute path", ErrNotAPlan, i, p))
			}
		}
	}
	return &plan, nil
}

// ForPods returns the part of plan that concerns the pods of uids: their
// actions, in order (a staging mount's report of no pod is left out).
func ForPods(plan *ActionPlan, uids []string) *ActionPlan {
	out := *plan
	out.Actions = make([]Action, 0, len(plan.Actions))
	for _, a := range plan.Actions {
		if a.PodUID != "" && slices.Contains(uids, a.PodUID) {
			out.Actions = append(out.Actions, a)
		}
	}
	return &out
}

// Reviewed returns the plan to carry out when a person reviewed one plan
// and the node was planned afresh since: fresh, where each action that
// acts runs only if reviewed has the same action (ActionKey), and is kept
// otherwise, with why. An action of fresh that needs one kept (a dir above
// it, a mount it is below, the NodeUnpublish before a NodeUnstage) is kept
// too. Each action of reviewed that fresh does not have is added as Keep,
// saying it is not applied. Two actions are the same only if they judged
// the same mounts and inode (ActionKey.Judged). A reviewed plan of another
// pods dir or of another boot, or one without the pods dir's identity or
// the boot, keeps every action. What runs carries
// the conditions of both (MustBeUnmounted, MustBeEmpty,
// RecheckActiveVolumes; of OtherVolumes, those both name), and Execute
// checks every one of them as it checks any plan. Reports (Keep,
// NeedsDriver) are fresh's.
func Reviewed(reviewed, fresh *ActionPlan) *ActionPlan {
	out := &ActionPlan{SchemaVersion: fresh.SchemaVersion, PodsDir: fresh.PodsDir, PodsDirIdentity: fresh.PodsDirIdentity, BootID: fresh.BootID,
		Notes: slices.Clone(fresh.Notes), Actions: make([]Action, 0, len(fresh.Actions)), leaks: fresh.leaks}
	approved := map[ActionKey][]Action{}
	other := ""
	if err := errors.Join(SamePodsDir(reviewed, fresh), sameBootOf(reviewed, fresh)); err != nil {
		other = err.Error()
		out.Notes = append(out.Notes, "nothing of the reviewed plan is carried out: "+other)
	} else {
		for _, a := range reviewed.Actions {
			if acts(a.Action) {
				approved[KeyOf(a)] = append(approved[KeyOf(a)], a)
			}
		}
	}
	kept := map[string][]Action{} // by pod: what is not applied
	for _, a := range fresh.Actions {
		k := KeyOf(a)
		switch {
		case !acts(a.Action):
			out.Actions = append(out.Actions, a)
		case other != "":
			out.Actions = append(out.Actions, notApplied(a, "not applied: "+other, "planned now"))
		case len(approved[k]) == 0:
			kept[a.PodUID] = append(kept[a.PodUID], a)
			out.Actions = append(out.Actions, notApplied(a, "not in the reviewed plan: not applied", "planned now"))
		default:
			if needed, ok := needsKept(a, kept[a.PodUID]); ok {
				kept[a.PodUID] = append(kept[a.PodUID], a)
				out.Actions = append(out.Actions, notApplied(a, "not applied: "+needed, "planned now"))
			} else {
				out.Actions = append(out.Actions, withConditions(a, approved[k][0]))
			}
			approved[k] = approved[k][1:]
		}
	}
	for _, a := range reviewed.Actions {
		if k := KeyOf(a); other == "" && acts(a.Action) && len(approved[k]) > 0 {
			approved[k] = approved[k][1:]
			out.Actions = append(out.Actions, notApplied(a, "in the reviewed plan, not in a fresh plan of the node: not applied "+
				"(the node changed since the review, or the flags differ)", "reviewed"))
		}
	}
	return out
}

// ActionKey is what makes two actions the same action: its kind, path
// and pod, what it judged (the very mounts and inode: Judged), and for a
// call to a CSI driver the driver, the volume and the mount expected at
// the path.
type ActionKey struct {
	Action           ActionKind
	Path, PodUID     string
	Driver, VolumeID string
	Source           mountscan.Subtree
	CSI              bool
	// Judged names the mounts and the inode the action judged
	// (Action.Mounts, Action.Inode), in order: two plans agree on an
	// action only when they judged the same objects.
	Judged string
}

// KeyOf returns a's ActionKey.
func KeyOf(a Action) ActionKey {
	k := ActionKey{Action: a.Action, Path: a.Path, PodUID: a.PodUID, Judged: judgedKey(a)}
	if a.CSI != nil {
		k.CSI, k.Driver, k.VolumeID, k.Source = true, a.CSI.Driver, a.CSI.VolumeID, a.CSI.Source
	}
	return k
}

// judgedKey is the objects a judged, as text. A directory is its inode
// only: its size and link count change as its entries are removed.
func judgedKey(a Action) string {
	var b strings.Builder
	for _, m := range a.Mounts {
		fmt.Fprintf(&b, "mount %d %d %q %q %q;", m.ID, m.UniqueID, m.Dev, m.FSType, m.Root)
	}
	switch i := a.Inode; {
	case i == nil:
	case i.Type == InodeDir:
		fmt.Fprintf(&b, "inode %q %d %q", i.Dev, i.Ino, i.Type)
	default:
		fmt.Fprintf(&b, "inode %q %d %q %d %d", i.Dev, i.Ino, i.Type, i.Size, i.Nlink)
	}
	return b.String()
}

// sameBootOf checks that a reviewed plan was made in the boot fresh was:
// the mounts and inodes they judged are of one boot only.
func sameBootOf(reviewed, fresh *ActionPlan) error {
	switch {
	case reviewed.BootID == "":
		return fmt.Errorf("%w: the reviewed plan records no boot of the node (made by an older volrecon?): plan again", ErrOtherBoot)
	case reviewed.BootID != fresh.BootID:
		return fmt.Errorf("%w: the reviewed plan was made in boot %s, the plan now in boot %q (the node restarted since, or the plan is of another node)",
			ErrOtherBoot, reviewed.BootID, fresh.BootID)
	}
	return nil
}

// acts: the action changes the node when applied (not a report).
func acts(k ActionKind) bool { return k != Keep && k != NeedsDriver }

// ErrOtherPodsDir: a reviewed plan is not of the pods dir planned now.
var ErrOtherPodsDir = errors.New("the reviewed plan is not of this pods dir")

// SamePodsDir checks that a reviewed plan was made for the pods dir fresh
// was: the same path and the same identity (ActionPlan.PodsDirIdentity),
// which both record. Otherwise Reviewed carries out nothing, and the
// error (ErrOtherPodsDir) says why.
func SamePodsDir(reviewed, fresh *ActionPlan) error {
	switch {
	case reviewed.PodsDir != fresh.PodsDir:
		return fmt.Errorf("%w: it is of pods dir %s, this node's is %s", ErrOtherPodsDir, reviewed.PodsDir, fresh.PodsDir)
	case reviewed.PodsDirIdentity == nil:
		return fmt.Errorf("%w: it records no identity of its pods dir (made by an older volrecon?): plan again", ErrOtherPodsDir)
	case fresh.PodsDirIdentity == nil:
		return fmt.Errorf("%w: the pods dir's identity could not be recorded now", ErrOtherPodsDir)
	case *reviewed.PodsDirIdentity != *fresh.PodsDirIdentity:
		return fmt.Errorf("%w: it is of another pods dir (%s) than this node's (%s)", ErrOtherPodsDir, reviewed.PodsDirIdentity, fresh.PodsDirIdentity)
	}
	return nil
}

// needsKept says which kept action of its pod a needs done first: one
// below the dir a removes, one of a mount a lies at or below, or the
// NodeUnpublish of the volume a NodeUnstage unstages.
func needsKept(a Action, kept []Action) (string, bool) {
	for _, k := range kept {
		switch {
		case a.Action == Rmdir && strings.HasPrefix(k.Path, a.Path+"/"):
			return k.Path + ", below it, is not applied", true
		case (k.Action == Unmount || k.Action == NodeUnpublish) && (a.Path == k.Path || strings.HasPrefix(a.Path, k.Path+"/")):
			return "the " + string(k.Action) + " of " + k.Path + " is not applied", true
		case a.Action == NodeUnstage && k.Action == NodeUnpublish && a.CSI != nil && k.CSI != nil &&
			a.CSI.Driver == k.CSI.Driver && a.CSI.VolumeID == k.CSI.VolumeID:
			return "the NodeUnpublish of " + k.Path + " is not applied", true
		}
	}
	return "", false
}

// notApplied turns a into a Keep that says why, and what it was (label:
// where it was planned).
func notApplied(a Action, why, label string) Action {
	return Action{Action: Keep, Path: a.Path, PodUID: a.PodUID, Evidence: a.Evidence,
		Reason: why + " (" + label + ": " + string(a.Action) + ": " + a.Reason + ")"}
}

// withConditions returns the fresh action a with the conditions of the
// reviewed one added: both are checked.
func withConditions(a, reviewed Action) Action {
	a.MustBeUnmounted = slices.Clone(a.MustBeUnmounted)
	for _, p := range reviewed.MustBeUnmounted {
		if !slices.Contains(a.MustBeUnmounted, p) {
			a.MustBeUnmounted = append(a.MustBeUnmounted, p)
		}
	}
	a.MustBeEmpty = a.MustBeEmpty || reviewed.MustBeEmpty
	if a.CSI != nil && reviewed.CSI != nil {
		call := *a.CSI
		call.RecheckActiveVolumes = call.RecheckActiveVolumes || reviewed.CSI.RecheckActiveVolumes
		// Another volume is no user only where both plans proved it.
		call.OtherVolumes = slices.DeleteFunc(slices.Clone(call.OtherVolumes), func(o OtherVolume) bool {
			return !slices.Contains(reviewed.CSI.OtherVolumes, o)
		})
		a.CSI = &call
	}
	return a
}
