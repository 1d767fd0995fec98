// Package reconstruct rebuilds the actual volume state of a Kubernetes node
// from the operating system alone.
//
// Scan joins the kubelet root dir inventory (package podsdir) with the mount
// table (package mountscan) into one State: pods, volumes, CSI staging
// ("global") mounts, the attachable volumes that must not be detached
// (volumesInUse, as node.status.volumesInUse holds them, plus leaked staging
// mounts the kubelet would not report), loop devices on block map files,
// and findings. Given the pods that should exist (Options.ActivePods), it
// also tells which pod dirs are orphaned. Build does the same from an
// inventory the caller gathered.
//
// The rules it follows, in order of importance:
//
//   - Mount state comes from the mount table, never from guesses or device
//     numbers: a volume is Mounted only when the table has an entry at the
//     path checked, Unmounted only when the table was read consistently and
//     has none, and Uncertain otherwise. A failed lookup is never "gone".
//   - A pod is Orphaned only when the list of active pods was given, without
//     error, and lacks it; it is removable only on evidence that it no longer
//     runs (Options.LifeChecker), or on the caller's explicit word
//     (Options.AssumeOrphansDead). No evidence gathered is unknown: kept.
//   - No stat or readdir inside a possible mount point during the scan. The
//     optional probe (Options.Probe) stats mounted paths in goroutines of
//     their own, each with a timeout, so one hung NFS or FUSE mount never
//     blocks the rest.
//   - No API server, no CSI driver, no plugin registration is needed.
//   - The result is deterministic: every list is sorted.
//
// What the scan could not read, though it went on (the mount table, the
// pod source), is a typed error of the State (State.Err: ErrMountTable,
// ErrActivePods; a list that names none of the pod dirs is refused so with
// Options.ActivePodsMustBeHere: ErrNoActivePodHere); a mount table not read
// is Scan's error too, returned with the State. A mount table that is
// not the host's when the host is read under a HostRoot (the container's
// own /proc/self/mountinfo) is refused before anything is read
// (Node.CheckMountTable, ErrNotHostMountTable). The paths whose filesystem calls hung are remembered in
// a HungPaths, the process's unless Node.HungPaths names one of the
// caller's own, so that nothing is sent there again.
//
// Each FindingKind is declared once (KindInfos): its severity, the cases
// (SeverityCase) in which it differs, and a one-line description. Every
// Finding the scan makes takes its severity from there.
//
// It is not for changing the node: package cleanup plans and applies the
// cleanup of orphaned pod dirs from a State. It never calls CSI drivers.
package reconstruct
