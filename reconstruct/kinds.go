package reconstruct

import "slices"

// FindingKind is the fixed vocabulary of findings. Kinds may be added, never
// renamed; each is declared in KindInfos.
type FindingKind string

// Finding kinds.
const (
	// OrphanedPodMounted: an orphaned pod with something still mounted at or
	// below its dir (or whose mounts are unknown): the CSI driver
	// (NodeUnpublish) or an unmount must come first.
	OrphanedPodMounted FindingKind = "OrphanedPodMounted"
	// OrphanedPodRemovable: an orphaned pod with nothing mounted at or below
	// its dir, no evidence of life (Options.LifeChecker found none, or, with
	// none, Options.AssumeOrphansDead) and nothing in it the cleanup plan
	// keeps: its dirs can go.
	OrphanedPodRemovable FindingKind = "OrphanedPodRemovable"
	// OrphanedPodNeedsDriver: an orphaned pod with nothing mounted at or
	// below its dir whose dir the cleanup plan keeps for the CSI driver: a
	// pod-level vol_data.json a live staging mount may need, or that a
	// restarted kubelet tears its volume down with (its driver is
	// registered), a block volume still mapped or staged. The message says
	// what must happen first; never remove it by hand.
	OrphanedPodNeedsDriver FindingKind = "OrphanedPodNeedsDriver"
	// OrphanedPodKept: an orphaned pod with nothing mounted at or below its
	// dir whose dir the cleanup plan keeps for what is not the kubelet's to
	// remove: data on the node's disk, entries the kubelet does not create,
	// a dir not named by a pod UID. The message says which.
	OrphanedPodKept FindingKind = "OrphanedPodKept"
	// OrphanedPodRunning: an orphaned pod that still runs (a mount namespace
	// holds a mount from its dir, or the container runtime lists it), or
	// whose evidence of life could not be gathered, or was not (no
	// Options.LifeChecker, and no Options.AssumeOrphansDead): nothing of it
	// may be removed or unmounted, it is only reported.
	OrphanedPodRunning FindingKind = "OrphanedPodRunning"
	// LeakedGlobalMount: a CSI staging mount that no pod mount uses (the
	// kubelet restarted between NodeUnpublish and NodeUnstage).
	LeakedGlobalMount FindingKind = "LeakedGlobalMount"
	// StaleVolumeData: a pod-level vol_data.json of an unmounted CSI volume,
	// or metadata that disagree with the mount table.
	StaleVolumeData FindingKind = "StaleVolumeData"
	// MissingVolumeData: a CSI volume or staging dir without its vol_data.json.
	MissingVolumeData FindingKind = "MissingVolumeData"
	// CorruptVolumeData: a vol_data.json that is empty, truncated, too large
	// or not a JSON object.
	CorruptVolumeData FindingKind = "CorruptVolumeData"
	// CorruptedMount: (probe) a mount that answers ENOTCONN, ESTALE, EIO,
	// EHOSTDOWN or ENODEV.
	CorruptedMount FindingKind = "CorruptedMount"
	// HungMount: a path the scan could not read, the message says why: a
	// stat (probe) or a call of the walk that did not return in time, a
	// mount not entered, a listing past its limits, a walk past its budget.
	HungMount FindingKind = "HungMount"
	// RootDiskBackedMount: a CSI mount on the filesystem that holds the
	// kubelet root: the volume's data goes to the node's disk.
	RootDiskBackedMount FindingKind = "RootDiskBackedMount"
	// StackedMount: several mounts on one path.
	StackedMount FindingKind = "StackedMount"
	// DataOnNodeDisk: an unmounted target, staging dir or persistent volume
	// dir that holds files: the only copy of data an app wrote.
	DataOnNodeDisk FindingKind = "DataOnNodeDisk"
	// UnknownPlugin: a FlexVolume or removed in-tree plugin.
	UnknownPlugin FindingKind = "UnknownPlugin"
	// InconsistentMountTable: the mount table could not be read consistently.
	InconsistentMountTable FindingKind = "InconsistentMountTable"
	// UnexpectedEntry: something on disk that does not fit the kubelet's layout.
	UnexpectedEntry FindingKind = "UnexpectedEntry"
	// StagingHashMismatch: a staging dir not named by the sha256 of its handle.
	StagingHashMismatch FindingKind = "StagingHashMismatch"
	// LegacyLayout: a staging dir in the layout of Kubernetes 1.23 and older.
	LegacyLayout FindingKind = "LegacyLayout"
	// SELinuxContextMismatch: vol_data.json and the mount's context= disagree.
	SELinuxContextMismatch FindingKind = "SELinuxContextMismatch"
	// LeakedLoopDevice: a loop device on a block volume's map file whose pod
	// is orphaned or whose volume is not mapped any more.
	LeakedLoopDevice FindingKind = "LeakedLoopDevice"
	// DeletedDeviceBehindMount: a block volume's publish, map or staging
	// file is bound from a device node that was deleted since (the mount
	// table's root ends in "//deleted", MountRef.Deleted): the device was
	// replaced under the live mount, and only a restage through the driver
	// mends it. The volume stays held.
	DeletedDeviceBehindMount FindingKind = "DeletedDeviceBehindMount"
	// BlockPublishNotADevice: a block volume's publish target is bound from
	// a regular file, not a device node (NodeStage was skipped, after an
	// unclean reboot): the container runtime refuses it. Kept, never
	// unlinked.
	BlockPublishNotADevice FindingKind = "BlockPublishNotADevice"
)

// Finding kinds of the field cases of 2023–2026 (failure-cases.md section E).
const (
	// SELinuxContextConflict: pods that share a volume (and its staging
	// vol_data.json) record different SELinux labels, an empty one against
	// a set one included: the kubelet refuses to start the later pod.
	SELinuxContextConflict FindingKind = "SELinuxContextConflict"
)

// Finding kinds of the late-2026 field cases (failure-cases.md section F)
// that the kernel tells of a mounted volume's filesystem and device.
const (
	// FilesystemAbortedReadOnly: a staging or publish mount that is
	// read-write while its superblock is read-only ("ro", or "emergency_ro"
	// as Linux 6.18 shows an ext4 aborted on an error): every write fails
	// with EROFS. The volume stays Mounted and in use (case 57).
	FilesystemAbortedReadOnly FindingKind = "FilesystemAbortedReadOnly"
	// StagingDeviceGone: a staging mount whose block device is gone, by the
	// host's sysfs (/sys/dev/block/<major>:<minor> does not exist while
	// /sys/dev/block does); a read that fails or hangs tells nothing. The
	// volume stays in use (case 58).
	StagingDeviceGone FindingKind = "StagingDeviceGone"
)

// SeverityCase names a circumstance in which a kind's findings have
// another severity than the kind's default (KindInfo.Variants).
type SeverityCase string

// Severity cases.
const (
	// CaseMounted: what the finding is about is mounted, or its mount state
	// is uncertain (its VolumeState is not Unmounted).
	CaseMounted SeverityCase = "mounted"
	// CaseDisagrees: metadata disagree with the mount table.
	CaseDisagrees SeverityCase = "disagrees"
)

// SeverityVariant is a case in which a kind's findings have another
// severity than the kind's default.
type SeverityVariant struct {
	Case     SeverityCase
	Severity Severity
	// When says in one line what the case means for this kind.
	When string
}

// KindInfo declares a FindingKind: the severity of its findings, the cases
// in which it differs, and what the kind means. It is the one place a
// severity is decided: the scan's findings take theirs from it, and the
// metrics, the alert rules' tests and the schema's tests read it (KindInfos,
// FindingKinds, SometimesCriticalKinds).
type KindInfo struct {
	Kind FindingKind
	// Severity is the severity of the kind's findings outside its Variants.
	Severity Severity
	// Variants are the cases in which the kind's findings have another
	// severity; most kinds have none.
	Variants []SeverityVariant
	// Description says in one line what a finding of the kind means.
	Description string
}

// declaredKinds declares every FindingKind, in the order of FindingKinds.
var declaredKinds = []KindInfo{
	{OrphanedPodMounted, SeverityWarning, nil,
		"An orphaned pod with something mounted at or below its dir, or whose mounts are unknown: the CSI driver or an unmount must come first."},
	{OrphanedPodRemovable, SeverityInfo, nil,
		"An orphaned pod with nothing mounted, no evidence of life and nothing the cleanup plan keeps: its dirs can go."},
	{OrphanedPodNeedsDriver, SeverityWarning, nil,
		"An orphaned pod with nothing mounted whose dir the cleanup plan keeps for the CSI driver."},
	{OrphanedPodKept, SeverityWarning, nil,
		"An orphaned pod with nothing mounted whose dir the cleanup plan keeps for what is not the kubelet's to remove."},
	{OrphanedPodRunning, SeverityWarning, nil,
		"An orphaned pod that still runs, or whose evidence of life is unknown: it is only reported."},
	{LeakedGlobalMount, SeverityWarning, nil,
		"A CSI staging mount that no pod mount uses: NodeUnstage through the driver is needed."},
	{StaleVolumeData, SeverityWarning, []SeverityVariant{{CaseDisagrees, SeverityCritical,
		"its metadata disagree with the mount table: nothing about the volume can be trusted"}},
		"A pod-level vol_data.json of an unmounted CSI volume, or metadata that disagree with the mount table."},
	{MissingVolumeData, SeverityWarning, []SeverityVariant{{CaseMounted, SeverityCritical,
		"its volume is mounted or uncertain: the kubelet cannot tear it down"}},
		"A CSI volume or staging dir without its vol_data.json."},
	{CorruptVolumeData, SeverityWarning, []SeverityVariant{{CaseMounted, SeverityCritical,
		"its volume is mounted or uncertain: the kubelet cannot tear it down"}},
		"A vol_data.json that is empty, truncated, too large or not a JSON object."},
	{CorruptedMount, SeverityCritical, nil,
		"A mount that answers ENOTCONN, ESTALE, EIO, EHOSTDOWN or ENODEV: it must be unmounted first."},
	{HungMount, SeverityCritical, nil,
		"A path the scan could not read in time or within its limits; the message says why."},
	{RootDiskBackedMount, SeverityCritical, nil,
		"A CSI mount on the filesystem that holds the kubelet root: the volume's data goes to the node's disk."},
	{StackedMount, SeverityWarning, nil,
		"Several mounts on one path: one unmount is not enough."},
	{DataOnNodeDisk, SeverityCritical, nil,
		"An unmounted target, staging dir or persistent volume dir that holds files: the only copy of data an app wrote."},
	{UnknownPlugin, SeverityInfo, []SeverityVariant{{CaseMounted, SeverityWarning,
		"the volume is mounted or uncertain: nothing will tear it down"}},
		"A volume of a FlexVolume or removed in-tree plugin: its teardown cannot be guessed."},
	{InconsistentMountTable, SeverityCritical, nil,
		"The mount table could not be read consistently: every mount state is Uncertain."},
	{UnexpectedEntry, SeverityWarning, nil,
		"Something on disk that does not fit the kubelet's layout."},
	{StagingHashMismatch, SeverityCritical, nil,
		"A staging dir not named by the sha256 of its handle: it may be another volume's path."},
	{LegacyLayout, SeverityInfo, []SeverityVariant{{CaseMounted, SeverityWarning,
		"the staging dir is mounted or uncertain: kubelets since 1.24 never unstage it"}},
		"A staging dir in the layout of Kubernetes 1.23 and older."},
	{SELinuxContextMismatch, SeverityWarning, nil,
		"vol_data.json and the mount's context= disagree."},
	{LeakedLoopDevice, SeverityWarning, nil,
		"A loop device on a block volume's map file whose pod is orphaned or whose volume is not mapped any more."},
	{DeletedDeviceBehindMount, SeverityCritical, nil,
		"A block volume's file bound from a device node deleted since: only a restage through the driver mends it."},
	{BlockPublishNotADevice, SeverityCritical, nil,
		"A block publish target bound from a regular file, not a device node: the container runtime refuses it."},
	{SELinuxContextConflict, SeverityWarning, nil,
		"Pods that share a volume record different SELinux labels: the kubelet refuses to start the later pod."},
	// Late-2026 field cases: the kernel's view of a mounted volume.
	{FilesystemAbortedReadOnly, SeverityCritical, nil,
		"A read-write staging or publish mount whose filesystem the kernel turned read-only after an error: every write fails."},
	{StagingDeviceGone, SeverityCritical, nil,
		"A staging mount whose block device is gone from the host's sysfs: the volume's I/O fails and it stays in use."},
}

// kindIndex finds a kind's declaration in declaredKinds.
var kindIndex = func() map[FindingKind]int {
	out := make(map[FindingKind]int, len(declaredKinds))
	for i, k := range declaredKinds {
		out[k.Kind] = i
	}
	return out
}()

// KindInfos returns the declaration of every FindingKind, in the order of
// FindingKinds. It is a copy: no caller can change it for the others.
func KindInfos() []KindInfo {
	out := slices.Clone(declaredKinds)
	for i := range out {
		out[i].Variants = slices.Clone(out[i].Variants)
	}
	return out
}

// FindingKinds returns every FindingKind.
func FindingKinds() []FindingKind {
	out := make([]FindingKind, len(declaredKinds))
	for i, k := range declaredKinds {
		out[i] = k.Kind
	}
	return out
}

// SometimesCriticalKinds returns the FindingKinds whose findings are
// critical in some cases only (a variant is critical, the default is not):
// MissingVolumeData and CorruptVolumeData while their volume is mounted
// (the kubelet cannot tear it down), and StaleVolumeData when the metadata
// disagree with the mount table.
func SometimesCriticalKinds() []FindingKind {
	var out []FindingKind
	for _, k := range declaredKinds {
		if k.Severity != SeverityCritical && slices.Contains(k.Severities(), SeverityCritical) {
			out = append(out, k.Kind)
		}
	}
	return out
}

// Info returns the declaration of k; false if k is not a FindingKind of
// this version (a State decoded from a newer one).
func (k FindingKind) Info() (KindInfo, bool) {
	i, ok := kindIndex[k]
	if !ok {
		return KindInfo{}, false
	}
	info := declaredKinds[i]
	info.Variants = slices.Clone(info.Variants)
	return info, true
}

// Severity returns the declared severity of k's findings outside its
// variants; "" if k is not declared.
func (k FindingKind) Severity() Severity { return k.SeverityIn("") }

// SeverityIn returns the declared severity of k's findings in case c: the
// severity of k's variant for c, else k's default ("" if k is not declared).
func (k FindingKind) SeverityIn(c SeverityCase) Severity {
	i, ok := kindIndex[k]
	if !ok {
		return ""
	}
	for _, v := range declaredKinds[i].Variants {
		if v.Case == c {
			return v.Severity
		}
	}
	return declaredKinds[i].Severity
}

// Severities returns every severity the kind's findings can have, each
// once, lowest first.
func (i KindInfo) Severities() []Severity {
	var out []Severity
	for _, s := range Severities() {
		if s == i.Severity || slices.ContainsFunc(i.Variants, func(v SeverityVariant) bool { return v.Severity == s }) {
			out = append(out, s)
		}
	}
	return out
}

// mountedCase is the severity case of a finding about something in state
// s: CaseMounted unless s is Unmounted.
func mountedCase(s VolumeState) SeverityCase {
	if s != Unmounted {
		return CaseMounted
	}
	return ""
}
