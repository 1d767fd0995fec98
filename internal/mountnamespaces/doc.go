// Package mountnamespaces finds every mount namespace on the node, reads
// each one's table once, and tells what holds each and which pods'
// containers it belongs to: the evidence that something outside the host's
// own table (a container, a pinned namespace) still uses a mount. Both the
// evidence of life (package liveness) and the evidence of death of the CSI
// teardown rest on it. It is not for deciding anything from that evidence.
//
// A mount namespace lives as long as something holds it, and a task is
// only one kind of holder: a bind mount of its namespace file
// (`unshare --mount=FILE`, snapd's /run/snapd/ns/*.mnt) or an open
// descriptor of it keeps it, and its mounts, with no task in it. So List
// finds namespaces three ways, each pinning (opening) the namespace's file
// as it finds it and identifying it by the file's inode, never by a PID:
//
//   - every task, /proc/<pid>/task/<tid>/ns/mnt (a thread may unshare a
//     namespace of its own; a process whose main thread exited lives on in
//     its other threads), with its cgroup file;
//   - every nsfs entry whose root is mnt:[N] in the tables read, the host's
//     and every namespace's, recursively (a pinned namespace may hold the
//     binds of more), opened from inside the namespace that holds it;
//   - every open namespace descriptor, /proc/<pid>/task/<tid>/fd/*: a
//     thread that unshared CLONE_FILES has a table of its own, so each
//     task's is walked unless kcmp proves it one already walked (this
//     process's own are its pins, and not looked at).
//
// A pin is opened O_PATH (no driver's open is ever called, whatever a
// reused descriptor or a swapped path leads to) and kept only when it is
// an nsfs file.
//
// Where the kernel lists every mount namespace (NS_MNT_GET_NEXT/PREV,
// Linux 6.12; complete only with CAP_SYS_ADMIN in the initial user
// namespace; used where procDir is a real procfs), its list is the
// complete one: the tasks are walked for their pods, and the binds and
// descriptors only looked for to say what holds a namespace with no task.
// It refuses the list outside the initial PID namespace, and List fails
// there, unless a test vouches for its PID namespace (NodePIDNamespaceEnv).
// It refuses it too, in the initial PID namespace, to a process without
// CAP_SYS_ADMIN: List then walks, as on a kernel before 6.12.
//
// What the kernel asks of the process (an error names what is missing):
// which namespace a task is in, and its descriptors and root, need ptrace
// read access to it (CAP_SYS_PTRACE, for a root process with more
// capabilities than this one); without it the walk cannot look at the
// descriptors, an error unless the kernel's complete list was had.
// Entering a namespace needs CAP_SYS_ADMIN and CAP_SYS_CHROOT; without
// them a namespace with no task cannot be read, an error.
// /proc/<pid>/mountinfo needs neither.
// The listing is repeated until two consecutive listings find the same
// namespaces, within the time bound; otherwise the result is an error.
// Without the kernel's list, each walk of the tasks then lists the
// processes again and walks at once those started since, until a list
// brings no namespace more: a namespace carried by tasks that each live a
// moment is never all gone by then (a walk of a busy /proc reaches the
// tasks it listed only when they are). What no walk of /proc shows (a
// namespace's descriptor in flight in a socket, a bind in a detached
// mount tree) only the kernel's list finds.
//
// A namespace is read through its pin: a reader thread (one that left the
// threads' shared fs_struct for good, and never exits nor runs anything
// else) enters it with setns and its table is read consistently
// (mountscan.ReadFile) as that thread's mountinfo; then it goes back.
// Where it cannot be entered (no CAP_SYS_ADMIN over it, or no
// CAP_SYS_CHROOT), the table is read through the first of its tasks still
// in it, its link checked before and after.
//
// A task that is gone, or a zombie (which holds no namespace any more), is
// skipped. Anything else that cannot be read is an error, never "gone": a
// process that exists but whose tasks cannot be listed, a live task
// without a namespace link, a table that cannot be read, a namespace seen
// whose holders all went before it could be pinned, one whose every task
// left when it could be read only through them. A task whose namespace id
// cannot be read (ptrace access denied) counts as a namespace of its own,
// read through its own mountinfo. Every read is bounded in time (and the
// whole of List), the tasks, namespaces and descriptors in count, the
// tables in size.
//
// A namespace's Pods say which pods its tasks belong to: the pod UID in
// each task's cgroup paths (both cgroup drivers' spellings, see
// PodOfCgroup), or a container PID the runtime named (Options.ContainerPIDs).
// The attribution is Complete only when it has tasks and every one is
// attributed: the host's namespace, one a host process entered, and one
// held only by a bind or a descriptor are nobody's pod proven.
package mountnamespaces
