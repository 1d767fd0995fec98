// Package mountnamespaces reads the mount table of every distinct mount
// namespace on the node, once each, and tells which pods' containers hold
// each namespace: the evidence that something outside the host's own table
// (a container) still uses a mount. Both the evidence of life (package
// liveness) and the evidence of death of the CSI teardown rest on it.
//
// A mount namespace is held by tasks, not processes: a thread may unshare
// one of its own (Go's LockOSThread pattern), and a process whose main
// thread exited lives on in its other threads, while the leader's
// /proc/<pid>/ns/mnt is gone (ENOENT) and its mountinfo fails (EINVAL).
// So List walks every task, /proc/<pid>/task/<tid>, and reads each one's
// ns/mnt link and cgroup file; a namespace's table is read once, through
// the first of its tasks still in it (its link is checked again before and
// after the read), consistently (mountscan.ReadFile).
//
// A task that is gone, or a zombie (which holds no namespace any more), is
// skipped. Anything else that cannot be read is an error, never "gone": a
// process that exists but whose tasks cannot be listed, a live task
// without a namespace link, a table that cannot be read. A task whose
// namespace id cannot be read (ptrace access denied) counts as a namespace
// of its own, read through its own mountinfo. Every read is bounded in
// time, the tasks and namespaces in count, the tables in size.
//
// A namespace's Pods say which pods its tasks belong to: the pod UID in
// each task's cgroup paths (both cgroup drivers' spellings, see
// PodOfCgroup), or a container PID the runtime named (Options.ContainerPIDs).
// The attribution is Complete only when every task of the namespace is
// attributed: the host's namespace, or one a host process entered, is not.
package mountnamespaces
