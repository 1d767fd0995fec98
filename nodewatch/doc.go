// Package nodewatch tells when a node's volume state may have changed, so
// that a long-running scanner (volrecon serve, a kubelet-like agent) scans
// only then, and walks again only what changed.
//
// A Watcher watches, at no cost while nothing changes:
//
//   - the mount table: POLLPRI on a live /proc/<pid>/mountinfo (the flag
//     mountscan.Watch uses), or inotify on a mount table that is a regular
//     file;
//   - the kubelet's dirs, with inotify: the kubelet root, pods/, each pod
//     dir and its volumes/ (and each plugin dir in it, and each CSI volume
//     dir), volumeDevices/, volume-subpaths/ and plugins/ dirs, the CSI
//     plugin dir and its staging and block dirs, plugins/ and
//     plugins_registry/. The top dirs (the root, pods/, plugins/,
//     plugins_registry/) are opened as the scan resolves them, and every
//     dir looked up on the way to one is watched for the entry looked up
//     (a rename, a symlink retargeted); Take checks, before it answers,
//     that each top dir still resolves through the same dirs (mount,
//     device, inode) to the dir its watch sits on, and sets every watch
//     up again when one does not (a mount came or went on or above it,
//     which no inotify event tells); a dir of the layout renamed in or
//     out of a watched one (or two exchanged in place) sets them up again
//     too, and is everything changed. It never watches inside a mount point
//     (each dir below the kubelet's top dirs is opened with
//     RESOLVE_NO_XDEV: a mount point is not crossed, so no user data is
//     watched and nothing is sent to a FUSE or network mount), and never
//     below a top dir that lies on a filesystem whose changes inotify does
//     not see (FUSE, NFS, CIFS...);
//   - the unmounted volume dirs a scan looked into for data (WatchData,
//     reconstruct.Incremental.DataDirs), for entries made and removed;
//   - files of the desired state (an --active-pods file), and Notify for
//     the rest (an informer's event).
//
// Wait blocks in one poll(2) on those descriptors until something changed;
// Take returns what changed since the last Take: which pod dirs, which CSI
// staging dirs or the CSI dirs as a whole, whether the mount table or the
// desired state, or everything. Pacer says when to scan after a change: a
// short settle, at most once per interval but for one follow-up of a
// burst's first scan (the kubelet's changes come in pairs: a dir, then
// its mount).
//
// Where the watches cannot be trusted the Watcher says so, logs it once,
// and reports the part as changed at every Take, so that a caller that
// takes at its own pace (serve: --min-interval) scans it that often: the
// kernel's event queue overflowed (everything changed once, and the
// watches are set up again), the inotify watch limit was reached (the
// pods whose dirs could not all be watched, or everything), a dir could
// not be watched, a top dir lies on FUSE or NFS (everything), or the mount
// table cannot be watched (the mount table). Polling says whether any
// such part exists. A mount made on a dir of the layout where the kubelet
// has none hides the dir its watch sits on, and only the mount table
// tells: the scan names those parts (reconstruct.Incremental.Unwatched),
// and a caller scans them at its own pace too. Every filesystem call is bounded in time
// (Options.FSTimeout) and every listing in entries.
package nodewatch
