//go:build unix

package podsdir

import (
	"errors"
	"fmt"

	"github.com/volrecon/volrecon/kubelet"
)

// DefaultRootDir is the kubelet's default --root-dir (kubelet.DefaultRootDir).
const DefaultRootDir = kubelet.DefaultRootDir

// DefaultMaxVolDataSize caps how much of a vol_data.json is read.
const DefaultMaxVolDataSize = 64 << 10

// CSIPluginName is the plugin name of CSI volumes (kubelet.CSIPluginName).
const CSIPluginName = kubelet.CSIPluginName

// CSIUniqueName is the kubelet's unique name of a CSI volume:
// kubernetes.io/csi/<driver>^<volumeHandle> (kubelet.UniqueVolumeName).
func CSIUniqueName(driver, handle string) string { return kubelet.UniqueVolumeName(driver, handle) }

// Mode is a volume mode.
type Mode string

// Volume modes.
const (
	Filesystem Mode = "Filesystem"
	Block      Mode = "Block"
)

// Layout is a CSI staging layout.
type Layout string

// CSI staging layouts.
const (
	// LayoutCurrent is plugins/kubernetes.io/csi/<driver>/<sha256hex(handle)>/globalmount (Kubernetes >= 1.24).
	LayoutCurrent Layout = "current"
	// LayoutLegacy is plugins/kubernetes.io/csi/pv/<pvName>/globalmount (Kubernetes <= 1.23).
	LayoutLegacy Layout = "legacy"
)

// EntryType is what a directory entry is, as readdir reports it (never followed).
type EntryType string

// Entry types.
const (
	TypeDir     EntryType = "dir"
	TypeFile    EntryType = "file"
	TypeSymlink EntryType = "symlink"
	TypeOther   EntryType = "other" // socket, device, fifo
)

// Entry is one directory entry. Path is a host path.
type Entry struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"`
	Type       EntryType `json:"type"`
	LinkTarget string    `json:"linkTarget,omitempty"` // for symlinks, read with readlink, never followed
}

// VolDataState says whether a vol_data.json could be used.
type VolDataState string

// vol_data.json states.
const (
	VolDataMissing VolDataState = "Missing"
	VolDataOK      VolDataState = "OK"
	VolDataCorrupt VolDataState = "Corrupt" // 0-byte, truncated, not an object, too big, unreadable, not a regular file, missing driverName/volumeHandle
)

// VolData is a parsed vol_data.json. Unknown keys are ignored.
type VolData struct {
	Path   string       `json:"path"`
	State  VolDataState `json:"state"`
	Reason string       `json:"reason,omitempty"` // why Corrupt
	VolDataKeys
}

// VolDataKeys are the keys of a vol_data.json that volrecon reads: the
// CSI volume's identity as the kubelet wrote it (reconstruct.CSIInfo
// holds them too).
type VolDataKeys struct {
	DriverName          string `json:"driverName,omitempty"`
	VolumeHandle        string `json:"volumeHandle,omitempty"`
	SpecVolID           string `json:"specVolID,omitempty"`
	NodeName            string `json:"nodeName,omitempty"`
	AttachmentID        string `json:"attachmentID,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
	// SELinuxMountContext is the key seLinuxMountContext: nil when the file
	// has no such key, a pointer to "" when it has it empty. The kubelet
	// tells the two apart (an empty label conflicts with a set one,
	// kubernetes#133424), and so does volrecon.
	SELinuxMountContext *string `json:"seLinuxMountContext,omitempty"`
}

// Volume is one pod volume directory (Filesystem) or map file (Block).
type Volume struct {
	PodUID        string    `json:"podUID"`
	Name          string    `json:"name"`          // spec name (dir name)
	Plugin        string    `json:"plugin"`        // unescaped, e.g. kubernetes.io/csi
	EscapedPlugin string    `json:"escapedPlugin"` // as on disk, e.g. kubernetes.io~csi
	Mode          Mode      `json:"mode"`
	Path          string    `json:"path"` // host path: volumes/<plugin>/<name> or volumeDevices/<plugin>/<name>
	Type          EntryType `json:"type"`
	LinkTarget    string    `json:"linkTarget,omitempty"`

	// CSI Filesystem volumes only (their dir is not a mount point; its child "mount" is).
	MountDir *Entry   `json:"mountDir,omitempty"` // <dir>/mount if present
	VolData  *VolData `json:"volData,omitempty"`  // <dir>/vol_data.json (State Missing if absent)
	Extra    []Entry  `json:"extra,omitempty"`    // other children of a CSI volume dir
}

// Subpath is one entry volume-subpaths/<volume>/<container>/<index>; a dir or a file (both are bind-mount targets).
type Subpath struct {
	PodUID    string    `json:"podUID"`
	Volume    string    `json:"volume"`
	Container string    `json:"container"`
	Index     string    `json:"index"`
	Path      string    `json:"path"`
	Type      EntryType `json:"type"`
}

// Pod is one directory pods/<uid>.
type Pod struct {
	UID      string    `json:"uid"`
	Path     string    `json:"path"` // host path
	Volumes  []Volume  `json:"volumes,omitempty"`
	Subpaths []Subpath `json:"subpaths,omitempty"`
	Other    []Entry   `json:"other,omitempty"` // entries of the pod dir other than volumes, volumeDevices, volume-subpaths
}

// StagingDir is a CSI staging (NodeStage) target found under plugins/kubernetes.io/csi.
type StagingDir struct {
	Mode    Mode      `json:"mode"`
	Layout  Layout    `json:"layout"`           // Filesystem only
	Driver  string    `json:"driver,omitempty"` // current layout: the directory name
	Name    string    `json:"name"`             // current: <sha256hex>; legacy: <pvName>; block: <specName>
	Dir     string    `json:"dir"`              // host path of the dir holding vol_data.json (block: volumeDevices/<specName>/data's parent)
	Path    string    `json:"path"`             // host path of the staging target: .../globalmount or volumeDevices/staging/<specName>
	Exists  bool      `json:"exists"`           // the staging target itself exists
	Type    EntryType `json:"type,omitempty"`   // of the staging target
	VolData VolData   `json:"volData"`          // FS: <Dir>/vol_data.json; block: volumeDevices/<specName>/data/vol_data.json
}

// BlockSpec is plugins/kubernetes.io/csi/volumeDevices/<specName> with its related paths.
type BlockSpec struct {
	SpecName      string  `json:"specName"`
	Dir           string  `json:"dir"` // host path of volumeDevices/<specName>
	VolData       VolData `json:"volData"`
	MapFiles      []Entry `json:"mapFiles,omitempty"`      // dev/<podUID>
	Publish       []Entry `json:"publish,omitempty"`       // publish/<specName>/<podUID>
	LegacyPublish *Entry  `json:"legacyPublish,omitempty"` // pre-1.17 publish/<specName> as a file
	Staging       *Entry  `json:"staging,omitempty"`       // staging/<specName>
}

// ProblemKind classifies what was wrong on disk.
type ProblemKind string

// Problem kinds.
const (
	ProblemNotDirectory  ProblemKind = "NotDirectory"  // a file (or socket, device, fifo) where a directory is expected; a symlink there is ProblemSymlink
	ProblemUnexpectedDir ProblemKind = "UnexpectedDir" // a directory where a file is expected
	ProblemUnreadable    ProblemKind = "Unreadable"    // readdir/open failed (permission, I/O)
	ProblemInvalidPodUID ProblemKind = "InvalidPodUID" // a pods/ entry whose name is not a UID
	ProblemSymlink       ProblemKind = "Symlink"       // a symlink where a real entry is expected; recorded, never followed
	ProblemUnexpected    ProblemKind = "Unexpected"    // anything else that does not belong
	// ProblemHung: what lies at or below Path is unknown, and the Message
	// says why: a filesystem call on Path did not return in time (a hung
	// NFS or FUSE mount at or above it), or was not made because one on a
	// path above it did not, earlier in this process; Path is a mount not
	// to enter (Options.NotEntered); its listing ran past Options.Limits;
	// the walk of its pod dir, or the scan, ran past its budget.
	ProblemHung ProblemKind = "Hung"
)

// Problem is something on disk that does not fit the kubelet's layout. The scan goes on.
type Problem struct {
	Kind    ProblemKind `json:"kind"`
	Path    string      `json:"path"` // host path
	PodUID  string      `json:"podUID,omitempty"`
	Message string      `json:"message"`
}

// Inventory is everything found under a kubelet root. All paths are host
// paths with symlinks in the root, pods and plugins dirs resolved, so they
// match mount-table paths.
type Inventory struct {
	RootDir         string       `json:"rootDir"`         // as configured
	ResolvedRootDir string       `json:"resolvedRootDir"` // host path, symlinks resolved
	PodsDir         string       `json:"podsDir"`         // host path, symlinks resolved
	PluginsDir      string       `json:"pluginsDir"`      // host path, symlinks resolved
	CSIDir          string       `json:"csiDir"`          // PluginsDir/kubernetes.io/csi
	Pods            []Pod        `json:"pods"`            // sorted by UID
	Staging         []StagingDir `json:"staging"`         // sorted by Path
	BlockSpecs      []BlockSpec  `json:"blockSpecs"`      // sorted by SpecName
	Problems        []Problem    `json:"problems"`        // sorted by Path
}

// ErrRootNotFound means the kubelet root dir does not exist.
var ErrRootNotFound = errors.New("kubelet root dir not found")

// RootError is returned by Scan when the root itself cannot be used.
type RootError struct {
	Path string // host path (with the host-root prefix, as read)
	Err  error
}

func (e *RootError) Error() string { return fmt.Sprintf("kubelet root %s: %v", e.Path, e.Err) }

// Unwrap returns the underlying error.
func (e *RootError) Unwrap() error { return e.Err }
