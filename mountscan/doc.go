// Package mountscan reads a Linux mount table (/proc/self/mountinfo, or
// the kernel's listmount(2) and statmount(2)) once, consistently, and
// indexes it so that a whole reconstruction pass can ask
// many questions about mounts without re-reading the file.
//
// What it is for:
//   - ReadFile reads the table consistently, because a single read can be
//     torn while mounts change: a live /proc table once, again only if the
//     kernel flagged a change of the mount namespace since the read began;
//     any other file until two consecutive reads are identical.
//   - Watch keeps a live table open and tells, without blocking, whether
//     it changed since it was last read (Watcher.Changed, Watcher.Read).
//   - ReadStatmount asks the kernel instead, by listmount(2) and
//     statmount(2) (Linux 6.15 for every field): no text is formatted or
//     parsed, and another mount namespace is read by its ID
//     (MountNamespaceID) without entering it. It gives the Table the parser
//     gives for that namespace's mountinfo: the same entries in the same
//     order (the kernel lists both by mount ID), the same fields, rendered
//     and unescaped as the parser's (Line is the entry's position), the
//     same Scope; the one field it cannot give is the superblock flag
//     "mand". A reading that a change may have torn is read again, as a
//     mountinfo read is: once when a watch of the namespace's mountinfo
//     saw no change during it, else until two readings agree, and
//     ErrInconsistent after MaxAttempts. Where the kernel cannot give the
//     table as mountinfo does (before 6.15; a seccomp filter; no
//     CAP_SYS_ADMIN over another namespace; another namespace's slave
//     whose propagate_from it cannot tell; a process whose root is not
//     the namespace's) the error wraps ErrStatmountUnavailable, and
//     Source.Method = MethodStatmount reads the mountinfo file then.
//     Table.Method says which read a table, Table.StatmountError why not
//     statmount.
//   - Parse, ParseBytes and FromLines parse mountinfo text in one pass, with
//     no line-length limit. Root, MountPoint, FSType and Source are unescaped
//     (\040 is a space, \134 a backslash, ...), so they compare equal to the
//     paths that the rest of the program uses.
//     The kernel's "//deleted" suffix of a root whose file was unlinked is
//     no part of a path: Root is without it, and Mount.Deleted says so.
//   - A Table keeps the text it was parsed from, and its strings are views of
//     it: ReadFile hands its own read buffer to the table, ParseBytes makes
//     one copy of its input. A table costs little more memory than the text,
//     and holding any Mount keeps the whole text alive.
//   - A Table answers At, IsMountPoint, AtOrBelow, Containing, SameSubtree
//     and Refs from in-memory indexes. Refs is GetMountRefs of
//     k8s.io/mount-utils without re-reading the file per call, and it takes
//     and returns unescaped paths.
//   - Which mounts go when one is unmounted is the kernel's propagation
//     (fs/pnode.c, propagate_umount), and the one place that says it is
//     here: Table.Unmount of a mount of the host's table, Unmount.Claim of
//     an entry of any namespace's table, and PropagationGraph, the chains
//     of peer groups of every table read, which Proves the claim. A path
//     proves nothing: a copy is in the mount's peer group or a slave of
//     it, at the mount's place on a parent that receives propagation from
//     the mount's parent, with nothing mounted on it.
//
// What it is not for:
//   - It never stats, opens or unmounts a mount point, so it cannot hang on a
//     dead NFS server; the table says what the kernel listed at read time,
//     nothing more. Whether a path is reachable is the caller's business.
//   - It does not resolve symlinks: give it real paths.
//   - It does not decide visibility. Containing returns the entry with the
//     longest mount-point prefix; it does not follow parent IDs, so a mount
//     hidden by a later mount over one of its ancestors is still returned.
//
// Mount options (Options and SuperOptions) are kept raw and can hold
// secrets (e.g. CIFS or Ceph credentials). This package never logs them or
// puts them, or a whole line, into an error; callers must not either.
package mountscan
