// Package liveness looks for evidence that pods missing from the active pod
// list still run, before their dirs are called removable. A running
// container's volumes (an emptyDir on disk, its /etc/hosts, its termination
// log) are binds from the pod dir in the container's own mount namespace,
// so the host's mount table shows nothing of them. This package looks:
//
//   - in every distinct mount namespace on the node (/proc/<pid>/ns/mnt,
//     one read of /proc/<pid>/mountinfo per namespace, bounded in size and
//     time) for a mount of the pod dir's filesystem whose root lies in the
//     pod dir;
//   - where a CRI socket exists, in the container runtime's pod sandboxes
//     and containers, by their label io.kubernetes.pod.uid.
//
// A Checker implements reconstruct.LifeChecker: pass it as
// reconstruct.Options.LifeChecker. Evidence that could not be gathered (an
// unreadable /proc, a runtime that does not answer) is reported as Unknown,
// and reconstruct keeps such a pod as it keeps a running one.
//
// It is not for deciding that a pod runs from the API server, nor for
// talking to the runtime beyond listing: it never stops or removes anything.
package liveness
