package cleanup

import "fmt"

// ActionKind is what a cleanup action does.
type ActionKind string

// Action kinds.
const (
	// Rmdir removes an empty directory (never recursively).
	Rmdir ActionKind = "Rmdir"
	// Unlink removes a file, a symlink (never followed), a fifo or a socket.
	Unlink ActionKind = "Unlink"
	// RemoveVolumeData removes the pod-level vol_data.json of a CSI volume
	// that is unmounted and whose staging mount is not live.
	RemoveVolumeData ActionKind = "RemoveVolumeData"
	// Unmount unmounts a pod-level mount, until no entry is left at the path.
	Unmount ActionKind = "Unmount"
	// NeedsDriver reports that NodeUnpublish or NodeUnstage must happen
	// through the CSI driver; nothing is done.
	NeedsDriver ActionKind = "NeedsDriver"
	// Keep reports something that must stay, and why; nothing is done.
	Keep ActionKind = "Keep"
	// NodeUnpublish calls the CSI driver's NodeUnpublishVolume for a publish
	// target the kubelet cannot tear down (Options.CSITeardown).
	NodeUnpublish ActionKind = "NodeUnpublish"
	// NodeUnstage calls the CSI driver's NodeUnstageVolume for a staging
	// mount no pod uses (Options.CSITeardown).
	NodeUnstage ActionKind = "NodeUnstage"
)

// Action is one step of a cleanup Plan.
type Action struct {
	Action ActionKind `json:"action"`
	Path   string     `json:"path"`
	PodUID string     `json:"podUID,omitempty"`
	Reason string     `json:"reason"`
	// Evidence is what the action rests on, for a person to check.
	Evidence []string `json:"evidence,omitempty"`
	// MustBeUnmounted lists paths besides Path that must have no mount at or
	// below them when the action runs (the executor re-checks them).
	MustBeUnmounted []string `json:"mustBeUnmounted,omitempty"`
	// MustBeEmpty: an Unlink of what must hold no data when the action runs,
	// a file subpath target whose content shows only once it is unmounted.
	// The executor checks right before the unlink that it is a 0-byte
	// regular file (or a fifo or socket), and keeps it otherwise.
	MustBeEmpty bool `json:"mustBeEmpty,omitempty"`
	// CSI is the request of a NodeUnpublish or NodeUnstage action.
	CSI *CSICall `json:"csi,omitempty"`
}

// ActionPlan is an ordered list of cleanup actions: for each orphaned pod
// the deepest paths first and the pod dir last, then the reports about
// staging mounts. Its JSON is part of schema volrecon.v1.
type ActionPlan struct {
	SchemaVersion string `json:"schemaVersion"`
	// PodsDir is the pods dir the actions are confined to.
	PodsDir string `json:"podsDir,omitempty"`
	// PodsDirIdentity is the pods dir as Plan found it (statx under
	// Node.HostRoot, no symlink followed). Execute carries out nothing of a
	// plan against a pods dir that is not this one, nor of a plan without
	// it: a plan of an older volrecon, or one whose pods dir could not be
	// read when planning (Notes says why).
	PodsDirIdentity *DirIdentity `json:"podsDirIdentity,omitempty"`
	Actions         []Action     `json:"actions"`
	// Notes say what evidence of the teardown through the CSI driver could
	// not be gathered, so that nothing is torn down for it
	// (Options.CSITeardown).
	Notes []string `json:"notes,omitempty"`
}

// DirIdentity says which directory a path led to: its device
// ("major:minor"), inode and mount ID (0: the kernel does not report mount
// IDs, before Linux 5.8). Mount IDs belong to one mount namespace, and a
// new mount (a bind of a copy of the dir, say) has a new one, so a plan is
// carried out only in the mount namespace it was made in.
type DirIdentity struct {
	Dev     string `json:"dev"`
	Ino     uint64 `json:"ino"`
	MountID uint64 `json:"mountID"`
}

func (d *DirIdentity) String() string {
	return fmt.Sprintf("inode %d of device %s on mount %d", d.Ino, d.Dev, d.MountID)
}

// Result is the outcome of one action.
type Result string

// Results.
const (
	// Done: the action was carried out.
	Done Result = "Done"
	// Skipped: the action was not carried out (a dry run, a report, or the
	// node changed since the plan). Every result of a dry run is Skipped:
	// its Err, a *DryRunError, says what the run with Apply would give.
	Skipped Result = "Skipped"
	// Failed: the action was tried and failed; the rest of its pod is skipped.
	Failed Result = "Failed"
)

// ActionKinds returns every ActionKind, in a fixed order.
func ActionKinds() []ActionKind {
	return []ActionKind{Rmdir, Unlink, RemoveVolumeData, Unmount, NeedsDriver, Keep, NodeUnpublish, NodeUnstage}
}

// Results returns every Result, in a fixed order.
func Results() []Result { return []Result{Done, Skipped, Failed} }

// ActionResult is an Action with what happened to it. An action skipped
// because the node changed since the plan comes back as Keep, its Reason
// saying why.
type ActionResult struct {
	Action
	Result Result `json:"result"`
	// Error is Err's text: what JSON keeps of it.
	Error string `json:"error,omitempty"`
	// Err is why the action is not Done, as Execute met it, for errors.Is
	// and errors.As: ErrNodeChanged, ErrPodsDirChanged, ErrNotRun,
	// ErrRefused, a *csinode.CallError with the driver's gRPC status, an
	// errno, and in a dry run a *DryRunError (see ErrNodeChanged). nil for
	// an action Done, and for a report (Keep, NeedsDriver) of a run with
	// Apply. Not in JSON: a result decoded from it has Error only.
	Err error `json:"-"`
	// CSICalls are the calls made to the CSI driver, in order.
	CSICalls []CSICallResult `json:"csiCalls,omitempty"`
	// Changed says what the mount table showed changed after a CSI call.
	Changed []string `json:"changed,omitempty"`
}
