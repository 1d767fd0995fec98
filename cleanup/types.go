package cleanup

import (
	"fmt"

	"github.com/volrecon/volrecon/mountscan"
)

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
	// Unmount unmounts the pod-level mounts at the path that the plan
	// judged (Action.Mounts), topmost first, and nothing else.
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
	// Mounts are the mounts at Path the plan judged, topmost first: those
	// an Unmount unmounts, each checked right before its unmount to be the
	// mount then on top at Path, or the one mount a NodeUnpublish or
	// NodeUnstage tears down, checked before the call. An Unmount judges
	// every mount of a stack and records the maxStacked topmost (a stack
	// may be thousands deep): a later run unmounts the rest.
	Mounts []MountIdentity `json:"mounts,omitempty"`
	// Inode is what a Rmdir, Unlink or RemoveVolumeData judged at Path,
	// checked on the held file right before the call: nothing else is
	// removed. Not recorded for what a mount hid when planning (the
	// mount point, removed after its unmount: an Unlink of it is
	// MustBeEmpty, and rmdir removes only an empty dir).
	Inode *InodeIdentity `json:"inode,omitempty"`
}

// MountIdentity says which mount the plan judged. ID and Dev are given
// again to new mounts once a mount is gone; UniqueID never is within a
// boot (ActionPlan.BootID), and the plan records it where the kernel gives
// it (Linux 6.8+) for the table of the process's own mount namespace.
type MountIdentity struct {
	// ID is the mount ID of the mount table (mountinfo's first field).
	ID int `json:"id"`
	// UniqueID is the kernel's 64-bit mount ID (statmount(2)); 0: unknown.
	UniqueID uint64          `json:"uniqueID,omitempty"`
	Dev      mountscan.DevID `json:"dev"` // major:minor
	FSType   string          `json:"fsType"`
	Root     string          `json:"root"` // the path inside the filesystem that is mounted
}

// Subtree is the part of a filesystem the mount mounts (CSICall.Source).
func (m MountIdentity) Subtree() mountscan.Subtree {
	return mountscan.Subtree{Dev: m.Dev, Root: m.Root}
}

func (m MountIdentity) String() string {
	s := fmt.Sprintf("mount %d (%s %s:%s", m.ID, m.FSType, m.Dev, m.Root)
	if m.UniqueID != 0 {
		s += fmt.Sprintf(", unique ID %d", m.UniqueID)
	}
	return s + ")"
}

// InodeIdentity says which file the plan judged: the inode, its type, and
// for what is not a directory its size and link count, which a directory
// changes as its entries are removed.
type InodeIdentity struct {
	Dev   string    `json:"dev"` // major:minor
	Ino   uint64    `json:"ino"`
	Type  InodeType `json:"type"`
	Size  int64     `json:"size"`
	Nlink uint64    `json:"nlink"`
}

func (i *InodeIdentity) String() string {
	if i.Type == InodeDir {
		return fmt.Sprintf("%s %d of device %s", i.Type, i.Ino, i.Dev)
	}
	return fmt.Sprintf("%s %d of device %s (%d bytes, %d links)", i.Type, i.Ino, i.Dev, i.Size, i.Nlink)
}

// InodeType is the type of an inode.
type InodeType string

// Inode types.
const (
	InodeFile    InodeType = "file"
	InodeDir     InodeType = "dir"
	InodeSymlink InodeType = "symlink"
	InodeFIFO    InodeType = "fifo"
	InodeSocket  InodeType = "socket"
	InodeChar    InodeType = "char"
	InodeBlock   InodeType = "block"
	InodeOther   InodeType = "other" // a type no other says
)

// InodeTypes returns every InodeType, in a fixed order.
func InodeTypes() []InodeType {
	return []InodeType{InodeFile, InodeDir, InodeSymlink, InodeFIFO, InodeSocket, InodeChar, InodeBlock, InodeOther}
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
	// BootID is the boot of the node the plan was made in
	// (/proc/sys/kernel/random/boot_id): the mounts and files it judged
	// are of that boot. Execute carries out nothing of a plan of another
	// boot, nor of a plan without it.
	BootID  string   `json:"bootID,omitempty"`
	Actions []Action `json:"actions"`
	// Notes say what evidence of the teardown through the CSI driver could
	// not be gathered, so that nothing is torn down for it
	// (Options.CSITeardown).
	Notes []string `json:"notes,omitempty"`
	// leaks is what Execute with Apply records in the CSITeardown's Store
	// (nil: nothing); Plan itself writes nothing.
	leaks *leakRecord
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
	// its DryRun says what the run with Apply would give.
	Skipped Result = "Skipped"
	// Failed: the action was tried and failed; the rest of its pod is skipped.
	Failed Result = "Failed"
)

// DryRun is what a dry run found the run with Apply would give, on the
// node as it is now; why it would not be Done is the result's Err.
type DryRun struct {
	// Result is the result the run with Apply would give: Done when every
	// check passed, Failed, or Skipped (a report, an action it would keep,
	// which the result shows as Keep, or one it would not run).
	Result Result `json:"result"`
	// Would says what it would do, when Result is Done: the action's kind,
	// and what it rests on where there is more to say ("Unmount (2
	// stacked mounts)", the driver's endpoint of a CSI call).
	Would string `json:"would,omitempty"`
}

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
	// errno (see ErrNodeChanged); in a dry run the error the run with Apply
	// would meet. nil for an action Done, for a report (Keep, NeedsDriver),
	// and in a dry run for an action that would be Done. Not in JSON: a
	// result decoded from it has Error only.
	Err error `json:"-"`
	// DryRun is what the run with Apply would give, for a result of a dry
	// run (Execute without Apply); nil for a run with Apply.
	DryRun *DryRun `json:"dryRun,omitempty"`
	// CSICalls are the calls made to the CSI driver, in order.
	CSICalls []CSICallResult `json:"csiCalls,omitempty"`
	// Changed says what the mount table showed changed after a CSI call.
	Changed []string `json:"changed,omitempty"`
}
