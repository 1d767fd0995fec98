// Package reconstruct rebuilds the actual volume state of a Kubernetes node
// from the operating system alone, and plans and applies a cleanup of
// orphaned pod dirs that cannot lose data.
//
// Scan joins the kubelet root dir inventory (package podsdir) with the mount
// table (package mountscan) into one State: pods, volumes, CSI staging
// ("global") mounts, the volumes that must not be detached (volumesInUse),
// and findings. Given the pods that should exist (Options.ActivePods), it
// also tells which pod dirs are orphaned. PlanCleanup turns a State into an
// ordered Plan, and Execute applies it (a dry run unless told otherwise).
//
// The rules it follows, in order of importance:
//
//   - Mount state comes from the mount table, never from guesses or device
//     numbers: a volume is Mounted only when the table has an entry at the
//     path checked, Unmounted only when the table was read consistently and
//     has none, and Uncertain otherwise. A failed lookup is never "gone".
//   - A pod is Orphaned only when the list of active pods was given, without
//     error, and lacks it. Only Orphaned pods are cleaned up; nothing
//     Uncertain, nothing at or below a mount point, nothing recursively,
//     never through a symlink; staging mounts are never touched.
//   - Execute re-reads the mount table before each action and removes
//     through file descriptors opened with RESOLVE_BENEATH,
//     RESOLVE_NO_SYMLINKS and RESOLVE_NO_XDEV, so a change since the plan
//     skips the action instead of redirecting it.
//   - No stat or readdir inside a possible mount point during the scan. The
//     optional probe (Options.Probe) stats mounted paths in goroutines of
//     their own, each with a timeout, so one hung NFS or FUSE mount never
//     blocks the rest.
//   - No API server, no CSI driver, no plugin registration is needed.
//   - The result is deterministic: every list is sorted.
//
// It is not for calling CSI drivers: NodeUnpublish and NodeUnstage are
// reported as NeedsDriver actions for whoever can call the driver.
package reconstruct
