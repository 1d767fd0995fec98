package reconstruct

import (
	"github.com/volrecon/volrecon/podsdir"
)

// SchemaVersion names the JSON schema of State.
const SchemaVersion = "volrecon.v1"

// VolumeState is what the mount table says about a path.
type VolumeState string

// Volume states.
const (
	// Mounted: the mount table has an entry at the checked path.
	Mounted VolumeState = "Mounted"
	// Unmounted: the mount table was read consistently and has no entry there.
	Unmounted VolumeState = "Unmounted"
	// Uncertain: anything else. Never released, never cleaned up.
	Uncertain VolumeState = "Uncertain"
)

// PodStatus says whether a pod dir belongs to a pod that should exist.
type PodStatus string

// Pod statuses.
const (
	// PodActive: the pod is in the list of pods that should exist
	// (terminating pods are listed, so they stay Active).
	PodActive PodStatus = "Active"
	// PodOrphaned: the list was given, without error, and lacks the pod.
	PodOrphaned PodStatus = "Orphaned"
	// PodUnknown: no list was given, or getting it failed.
	PodUnknown PodStatus = "Unknown"
)

// Severity ranks a Finding.
type Severity string

// Severities.
const (
	// SeverityInfo: nothing is wrong yet; something can be cleaned up.
	SeverityInfo Severity = "info"
	// SeverityWarning: something needs a person or a driver to act.
	SeverityWarning Severity = "warning"
	// SeverityCritical: data or a volume's teardown is at risk.
	SeverityCritical Severity = "critical"
)

// The vocabularies, each in a fixed order. They are functions so that no
// caller can change them for the others.

// DesiredStateKinds returns the FindingKinds that only a known desired
// state, a pod status for every pod dir (Options.ActivePods answered), can
// give in full: the orphans' (only an Orphaned pod has one), and
// LeakedLoopDevice, which a loop device on the map file of a volume still
// mapped is only because its pod is orphaned. Without that (no pod source,
// its answer failed or refused, a pod Unknown because a path of it hung),
// no finding of these kinds says nothing: a check of them is unknown
// (package verdict).
func DesiredStateKinds() []FindingKind {
	return []FindingKind{OrphanedPodMounted, OrphanedPodRemovable, OrphanedPodNeedsDriver, OrphanedPodKept, OrphanedPodRunning,
		LeakedLoopDevice}
}

// PodStatuses returns every PodStatus.
func PodStatuses() []PodStatus { return []PodStatus{PodActive, PodOrphaned, PodUnknown} }

// VolumeStates returns every VolumeState.
func VolumeStates() []VolumeState { return []VolumeState{Mounted, Unmounted, Uncertain} }

// Severities returns every Severity, lowest first.
func Severities() []Severity { return []Severity{SeverityInfo, SeverityWarning, SeverityCritical} }

// State is the actual volume state of a node, rebuilt from the OS alone.
// Every slice is sorted, so equal inputs give byte-equal JSON. It is
// read-only: the States of an Incremental's scans share the values they
// have in common (copy one before changing it).
type State struct {
	SchemaVersion   string `json:"schemaVersion"`
	RootDir         string `json:"rootDir"`
	ResolvedRootDir string `json:"resolvedRootDir,omitempty"`
	// RootDirAliases are the aliases of the kubelet root the scan was given
	// (Node.RootDirAliases): a plan of this State counts a pod's mounts under
	// them as on the node.
	RootDirAliases []string       `json:"rootDirAliases,omitempty"`
	PodsDir        string         `json:"podsDir,omitempty"`
	MountTable     MountTableInfo `json:"mountTable"`
	// EvidenceOfLife: the scan looked for evidence that its orphans still
	// run (Options.LifeChecker). Without it no orphan is dead on evidence,
	// so no teardown through the CSI driver is planned for one.
	EvidenceOfLife bool            `json:"evidenceOfLife,omitempty"`
	ActivePods     *ActivePodsInfo `json:"activePods,omitempty"`
	Pods           []Pod           `json:"pods,omitempty"`
	Volumes        []Volume        `json:"volumes,omitempty"`
	GlobalMounts   []GlobalMount   `json:"globalMounts,omitempty"`
	// VolumesInUse are the unique names of the attachable volumes (Volume.
	// Attachable: persistent CSI volumes of drivers that are not attach-free,
	// in-tree iSCSI and FC) whose pod mount or staging mount is Mounted or
	// Uncertain, as the kubelet's node.status.volumesInUse holds them, plus
	// one thing the kubelet leaves out: attachable staging mounts that no pod
	// uses any more (LeakedGlobalMount), which the kubelet never reconstructs.
	VolumesInUse []string `json:"volumesInUse,omitempty"`
	// LoopDevices are the loop devices on block volumes\' map files.
	LoopDevices []LoopDevice `json:"loopDevices,omitempty"`
	Findings    []Finding    `json:"findings,omitempty"`
	// ClusterChecks says which checks of the cluster's objects were made
	// (Options.ClusterCheck; absent without one) and which are unknown.
	ClusterChecks *ClusterChecksInfo `json:"clusterChecks,omitempty"`

	errs scanErrors // the causes behind MountTable.Error and ActivePods.Error (Err)
}

// MountTableInfo says which mount table was used and whether it can be trusted.
type MountTableInfo struct {
	Path       string `json:"path"`
	Entries    int    `json:"entries"`
	Consistent bool   `json:"consistent"`
	Error      string `json:"error,omitempty"`
	// Limitation says what the table could not tell: set when its entries
	// came without major:minor and root (package mountutil, from
	// mount-utils' List), so that no bind mount could be matched.
	Limitation string `json:"limitation,omitempty"`
	// Watch says how a scanner that follows the table between scans
	// (serve) followed it: "fanotify" (the kernel's mount events: only
	// what changed was read again, mountscan.EventWatch) or "mountinfo"
	// (its change flag: read whole after each change). Empty for a scan
	// that reads the table once.
	Watch string `json:"watch,omitempty"`
}

// Pod is one pod directory.
type Pod struct {
	UID string `json:"uid"`
	// Namespace and Name are the pod's in the API, where the pod source
	// knows them (PodNamer): an active pod's, a static pod's from its
	// mirror pod. An orphan is in no list, so its name is unknown.
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name,omitempty"`
	Path      string    `json:"path"`
	Status    PodStatus `json:"status"`
	// MountPoints are the mount points at or below the pod dir, and at or
	// below its paths under the root's aliases (Options.RootDirAliases).
	MountPoints []string `json:"mountPoints,omitempty"`
	VolumeCount int      `json:"volumeCount"`
}

// MountRef describes the mount-table entry found at a path (the topmost one
// when mounts are stacked). It carries no mount options but one: the SELinux
// context= the mount has, which CSIInfo.SELinuxMountContext (what
// vol_data.json records) is compared with.
type MountRef struct {
	Source         string `json:"source"`
	FSType         string `json:"fsType"`
	MajorMinor     string `json:"majorMinor"`
	Root           string `json:"root"`
	Count          int    `json:"count"`
	SELinuxContext string `json:"seLinuxContext,omitempty"`
	// Deleted: the file or device node the mount shows was deleted since
	// it was mounted (the kernel's root field ended in "//deleted", which
	// Root never holds: mountscan.Mount.Deleted).
	Deleted bool `json:"deleted,omitempty"`
}

// CSIInfo is the identity of a CSI volume.
type CSIInfo struct {
	// VolDataKeys are what vol_data.json records (SELinuxMountContext is
	// the file's, never the mount's: nil, no JSON field, when the file has
	// no seLinuxMountContext key; a pointer to "" when it has it empty,
	// which the kubelet keeps apart: an empty label conflicts with a set
	// one).
	podsdir.VolDataKeys
	// Recovered is true when the pod's vol_data.json was missing or corrupt
	// and the identity came from the staging dir instead.
	Recovered bool `json:"recovered"`
}

// Volume is one pod volume directory (or block map file).
type Volume struct {
	PodUID      string       `json:"podUID"`
	Name        string       `json:"name"`
	Plugin      string       `json:"plugin"`
	Mode        podsdir.Mode `json:"mode"`
	Path        string       `json:"path"`
	CheckedPath string       `json:"checkedPath"`
	State       VolumeState  `json:"state"`
	Reason      string       `json:"reason"`
	Mount       *MountRef    `json:"mount,omitempty"`
	CSI         *CSIInfo     `json:"csi,omitempty"`
	UniqueName  string       `json:"uniqueName,omitempty"`
	// Attachable: the kubelet would report the volume in
	// node.status.volumesInUse while it is in use (see State.VolumesInUse).
	Attachable bool `json:"attachable,omitempty"`
	// DeviceMountPath is the path the kubelet's actual state records as
	// the device mount path: the staging dir (globalmount) of a filesystem
	// volume, the global map path volumeDevices/<pv>/dev of a block volume.
	DeviceMountPath  string      `json:"deviceMountPath,omitempty"`
	DeviceMountState VolumeState `json:"deviceMountState,omitempty"`
	// StagingPath is the NodeStage target of a block volume,
	// volumeDevices/staging/<pv>, when that dir exists.
	StagingPath string         `json:"stagingPath,omitempty"`
	Layout      podsdir.Layout `json:"layout,omitempty"`
}

// GlobalMount is one CSI staging dir (NodeStage target).
type GlobalMount struct {
	Path         string         `json:"path"`
	Plugin       string         `json:"plugin"`
	Mode         podsdir.Mode   `json:"mode"`
	DriverName   string         `json:"driverName,omitempty"`
	VolumeHandle string         `json:"volumeHandle,omitempty"`
	SpecName     string         `json:"specName,omitempty"`
	Layout       podsdir.Layout `json:"layout,omitempty"`
	State        VolumeState    `json:"state"`
	Reason       string         `json:"reason"`
	PodUIDs      []string       `json:"podUIDs,omitempty"`
	Mount        *MountRef      `json:"mount,omitempty"`
	UniqueName   string         `json:"uniqueName,omitempty"`
	// Attachable: the volume's driver is not attach-free (Options.AttachFreeDrivers).
	Attachable bool `json:"attachable,omitempty"`
	// SELinuxMountContext is what the staging dir's vol_data.json records
	// (the device mount's label), as CSIInfo.SELinuxMountContext: absent,
	// empty ("") or set.
	SELinuxMountContext *string `json:"seLinuxMountContext,omitempty"`
}

// Finding is something on the node that needs attention.
type Finding struct {
	Kind     FindingKind `json:"kind"`
	Severity Severity    `json:"severity"`
	Path     string      `json:"path,omitempty"`
	PodUID   string      `json:"podUID,omitempty"`
	Volume   string      `json:"volume,omitempty"`
	Message  string      `json:"message"`
}
