// Package podsdir inventories what the kubelet left on disk under its root
// dir (default /var/lib/kubelet): pod dirs with their volume dirs, block
// volume map files, subpath bind-mount targets and other entries, and the
// CSI staging and raw block dirs under plugins/kubernetes.io/csi, with the
// CSI vol_data.json metadata files parsed.
//
// # What it is for
//
// Scan returns an Inventory of names, entry types and metadata, and a list
// of Problems for everything that does not fit the kubelet's layout (stray
// files, symlinks, unreadable dirs, names that are not pod UIDs, corrupt
// vol_data.json). One bad entry never stops the scan; only an unusable root
// is an error (*RootError, wrapping ErrRootNotFound when it does not exist).
//
// All paths in the Inventory are host paths (without Options.HostRoot) in
// which symlinks in the root dir, in <root>/pods and in <root>/plugins are
// resolved, so they compare equal to the mount points the kernel reports.
// The package reads the host's filesystem under Options.HostRoot, so it can
// run in a container with the host's / mounted elsewhere.
//
// # How it reads
//
//   - Read-only: it never creates, changes or deletes anything.
//   - It never follows a symlink below the root, pods and plugins dirs: a
//     symlink is recorded (with its target, read by readlink) or reported as
//     ProblemSymlink. vol_data.json is opened with O_NOFOLLOW.
//   - It never stats, opens or lists anything inside a directory that could
//     be a mount point: non-CSI pod volume dirs, CSI "mount" dirs,
//     globalmount, block staging targets, map files, publish files and
//     subpath entries are only seen in their parent's listing, typed by
//     readdir's d_type. A hung NFS or FUSE mount therefore cannot block a
//     scan (but see the DT_UNKNOWN note on scanner.list). CSI Filesystem
//     volume dirs are listed, as they are not mount points (their child
//     "mount" is); vol_data.json files are read (lstat'ed first unless
//     their dir's listing showed a regular file; the fstat after the
//     O_NOFOLLOW|O_NONBLOCK open checks again either way).
//   - Every filesystem call is bounded by Options.Timeout: the pod dirs and
//     the CSI dir are walked as jobs of internal/bounded.RunBudgeted, whose
//     calls run on the walker under one watchdog; a job whose call hangs is
//     walked again on another walker, past the hung path. A listing is one
//     getdents per call and stops past Options.Limits (per dir and per
//     scan); each pod dir's walk stops past Options.PodBudget, every walk
//     past Options.ScanBudget; nothing at or below Options.NotEntered is
//     called at all. Each is a ProblemHung that says which.
//   - Pod dirs must be named like a pod UID: an 8-4-4-4-12 hex UUID in
//     either case, or 32 hex digits (static pods). Other names are
//     ProblemInvalidPodUID, and scanned all the same (the kubelet
//     reconstructs every dir under pods/), under the dir's name.
//   - A symlink where a directory is expected is ProblemSymlink; any other
//     non-directory there is ProblemNotDirectory. Unlike the kubelet, a
//     stray file under volumes/<plugin>/ is not taken for a volume.
//   - The result is deterministic: every list is sorted (see Inventory).
//
// # What it is not for
//
// It does not know what is mounted: it never reads the mount table and it
// does not decide whether a volume is mounted, uncertain or orphaned. That is
// the job of package mountscan (the mount table) and package reconstruct
// (joining both). It never deletes or unmounts anything, and it does not
// check that a current-layout staging dir name is the sha256 of the volume
// handle in its vol_data.json (see StagingHash).
//
// It builds on Unix only (the build constraint says so): it lists without
// following symlinks through O_NOFOLLOW and O_DIRECTORY, and reads device
// numbers from syscall.Stat_t, as the kubelet's Linux root dir needs.
package podsdir
