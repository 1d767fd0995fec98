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
	SeverityInfo     Severity = "info"
	SeverityWarning  Severity = "warning"
	SeverityCritical Severity = "critical"
)

// FindingKind is the fixed vocabulary of findings. Kinds may be added, never renamed.
type FindingKind string

// Finding kinds.
const (
	OrphanedPodMounted     FindingKind = "OrphanedPodMounted"
	OrphanedPodRemovable   FindingKind = "OrphanedPodRemovable"
	LeakedGlobalMount      FindingKind = "LeakedGlobalMount"
	StaleVolumeData        FindingKind = "StaleVolumeData"
	MissingVolumeData      FindingKind = "MissingVolumeData"
	CorruptVolumeData      FindingKind = "CorruptVolumeData"
	CorruptedMount         FindingKind = "CorruptedMount"
	HungMount              FindingKind = "HungMount"
	RootDiskBackedMount    FindingKind = "RootDiskBackedMount"
	StackedMount           FindingKind = "StackedMount"
	DataOnNodeDisk         FindingKind = "DataOnNodeDisk"
	UnknownPlugin          FindingKind = "UnknownPlugin"
	InconsistentMountTable FindingKind = "InconsistentMountTable"
	UnexpectedEntry        FindingKind = "UnexpectedEntry"
	StagingHashMismatch    FindingKind = "StagingHashMismatch"
	LegacyLayout           FindingKind = "LegacyLayout"
	SELinuxContextMismatch FindingKind = "SELinuxContextMismatch"
)

// State is the actual volume state of a node, rebuilt from the OS alone.
// Every slice is sorted, so equal inputs give byte-equal JSON.
type State struct {
	SchemaVersion   string          `json:"schemaVersion"`
	RootDir         string          `json:"rootDir"`
	ResolvedRootDir string          `json:"resolvedRootDir,omitempty"`
	PodsDir         string          `json:"podsDir,omitempty"`
	MountTable      MountTableInfo  `json:"mountTable"`
	ActivePods      *ActivePodsInfo `json:"activePods,omitempty"`
	Pods            []Pod           `json:"pods,omitempty"`
	Volumes         []Volume        `json:"volumes,omitempty"`
	GlobalMounts    []GlobalMount   `json:"globalMounts,omitempty"`
	VolumesInUse    []string        `json:"volumesInUse,omitempty"`
	Findings        []Finding       `json:"findings,omitempty"`
}

// MountTableInfo says which mount table was used and whether it can be trusted.
type MountTableInfo struct {
	Path       string `json:"path"`
	Entries    int    `json:"entries"`
	Consistent bool   `json:"consistent"`
	Error      string `json:"error,omitempty"`
}

// Pod is one pod directory.
type Pod struct {
	UID         string    `json:"uid"`
	Path        string    `json:"path"`
	Status      PodStatus `json:"status"`
	MountPoints []string  `json:"mountPoints,omitempty"`
	VolumeCount int       `json:"volumeCount"`
	// Contents is what an Orphaned pod dir holds, for PlanCleanup; it is
	// left out of the JSON.
	Contents *PodContents `json:"-"`
}

// MountRef describes the mount-table entry found at a path (the topmost one
// when mounts are stacked). It never carries mount options.
type MountRef struct {
	Source     string `json:"source"`
	FSType     string `json:"fsType"`
	MajorMinor string `json:"majorMinor"`
	Root       string `json:"root"`
	Count      int    `json:"count"`
}

// CSIInfo is the identity of a CSI volume.
type CSIInfo struct {
	DriverName          string `json:"driverName,omitempty"`
	VolumeHandle        string `json:"volumeHandle,omitempty"`
	SpecVolID           string `json:"specVolID,omitempty"`
	NodeName            string `json:"nodeName,omitempty"`
	AttachmentID        string `json:"attachmentID,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
	SELinuxMountContext string `json:"seLinuxMountContext,omitempty"`
	// Recovered is true when the pod's vol_data.json was missing or corrupt
	// and the identity came from the staging dir instead.
	Recovered bool `json:"recovered"`
}

// Volume is one pod volume directory (or block map file).
type Volume struct {
	PodUID           string         `json:"podUID"`
	Name             string         `json:"name"`
	Plugin           string         `json:"plugin"`
	Mode             podsdir.Mode   `json:"mode"`
	Path             string         `json:"path"`
	CheckedPath      string         `json:"checkedPath"`
	State            VolumeState    `json:"state"`
	Reason           string         `json:"reason"`
	Mount            *MountRef      `json:"mount,omitempty"`
	CSI              *CSIInfo       `json:"csi,omitempty"`
	UniqueName       string         `json:"uniqueName,omitempty"`
	DeviceMountPath  string         `json:"deviceMountPath,omitempty"`
	DeviceMountState VolumeState    `json:"deviceMountState,omitempty"`
	Layout           podsdir.Layout `json:"layout,omitempty"`
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
