// Package liveness looks for evidence that pods missing from the active pod
// list still run, before their dirs are called removable. A running
// container's volumes (an emptyDir on disk, its /etc/hosts, its termination
// log) are binds from the pod dir in the container's own mount namespace,
// so the host's mount table shows nothing of them. This package looks:
//
//   - in every distinct mount namespace on the node, the namespaces of
//     every task (/proc/<pid>/task/<tid>: a thread may hold a namespace of
//     its own, a process whose main thread exited lives on in the others),
//     each table read once, bounded in count, size and time, for a mount of
//     the pod dir's filesystem whose root lies in the pod dir, or of a
//     filesystem of the pod's own mounted below it (one the host's table
//     mounts nowhere else: a memory emptyDir's tmpfs, a secret's), that is
//     not the kubelet's own: the host's entries at or below the pod dir
//     and, in any namespace, the copies of them the kernel's propagation
//     proves (mountscan.Unmount); never by its path alone; and for a
//     mount on a dir or file of the pod dir, of any filesystem, that is
//     not the kubelet's nor a copy of one (removing that dentry in the
//     host's namespace would detach it in its own, data and all);
//   - in the tasks' cgroups, for a task in the pod's own cgroup;
//   - in the container runtime's pod sandboxes and containers, by their
//     label io.kubernetes.pod.uid, at the runtime sockets of the common
//     distributions (DefaultCRIEndpoints) or those given.
//
// A Checker implements reconstruct.LifeChecker: pass it as
// reconstruct.Options.LifeChecker. Evidence that could not be gathered (an
// unreadable /proc or task, no runtime found at any socket, a runtime that
// does not answer) is reported as Unknown, and reconstruct keeps such a
// pod as it keeps a running one. Checker.ContainerPIDs tells the runtime's
// container PIDs, for the attribution of mount namespaces to pods.
//
// It is not for deciding that a pod runs from the API server, nor for
// talking to the runtime beyond listing: it never stops or removes anything.
package liveness
