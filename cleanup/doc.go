// Package cleanup plans and applies the cleanup of orphaned pod dirs, in a
// way that cannot lose data.
//
// Plan turns a reconstruct.State into an ordered ActionPlan: for each
// Orphaned pod, what may be removed (empty dirs, the kubelet's own stub
// files, a stale vol_data.json where no driver can be asked to tear its
// volume down), unmounted (pod-level mounts, only when
// Options.Unmount allows it), left to the CSI driver (NeedsDriver) or kept,
// and why. It lists each orphaned pod dir itself — names only, never
// following a symlink, never entering a mount — against a mount table it
// reads afresh, so a State decoded from JSON plans the same as one from
// reconstruct.Scan. Execute applies a plan (a dry run unless
// ExecOptions.Apply is set: it then makes every check it would make before
// acting, acts on nothing, and each result's DryRun says what the run
// would give, its Err the error that run would meet). Each result's Err says why it is not Done as typed errors
// (ErrNodeChanged, ErrPodsDirChanged, ErrNotRun, ErrRefused, an errno, the
// driver's *csinode.CallError), its text in Error.
//
// The rules it follows, in order of importance:
//
//   - Only Orphaned pods are cleaned; nothing Uncertain, nothing at or below
//     a mount point, nothing recursively, never through a symlink; staging
//     mounts and CSI publish targets are only ever unmounted by their
//     driver, whether or not unmounting is allowed.
//   - A pod that keeps any mount gets reports only: its containers may
//     still be running. A pod dir whose name is not a pod UID is kept whole.
//   - Unmounts come before every removal of their pod.
//   - Plan records the pods dir's identity (ActionPlan.PodsDirIdentity) and
//     the boot (BootID), and Execute carries out nothing on another pods
//     dir or in another boot, nor a plan without them.
//   - Each action acts on what the plan judged: Plan judges every mount of
//     a stack and records the mounts each Unmount unmounts (Action.Mounts:
//     mount ID, device, type, root, and the unique mount ID where the
//     kernel gives it), the inode each removal removes (Action.Inode), and
//     the mount each NodeUnpublish or NodeUnstage tears down; Execute
//     checks each right before the call, and keeps what is not it.
//   - Execute holds the pods dir open and resolves every action beneath
//     it with RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS and RESOLVE_NO_XDEV,
//     checks each action against a mount table re-read whenever the kernel
//     reports a change, and stops when the pods dir changes, so a change
//     since the plan skips the action instead of redirecting it.
//
// NodeUnpublish and NodeUnstage are reported as NeedsDriver actions,
// unless Options.CSITeardown asks Plan to tear down through the driver
// what the kubelet never will: a publish target whose pod's vol_data.json
// is gone, of a pod dead on evidence, under the proven identity of the one
// staging mount it is bound from, and a staging mount no pod uses.
// Plan gathers that evidence itself, in one place (teardown.go, gather.go):
// from its own read of the mount table, one read of every mount namespace
// on the node, the scan's evidence of life, the record of when each staging
// mount was first seen unused, as the very mount in that boot (FileStore:
// Plan only reads it, Execute with Apply records what the plan saw),
// and the API server's answer of which volumes the active pods use
// (ActiveVolumeSource); what it cannot gather keeps the volume, and
// ActionPlan.Notes says why. A mount of a staging mount's or a pod's
// filesystem subtree, in any namespace, is a user unless the kernel's
// propagation proves it a copy of the kubelet's own mount (mountscan.Unmount,
// PropagationGraph: users.go); on a share, another volume is only a staging
// mount the scan knows (OtherVolume). Its path proves nothing. The decisions
// are in csi.go. Execute makes those calls through CSIExec.Driver, a
// CSIDriverClient (csinode.Connector; without one they fail, unsent), once
// each, after checking the mount table again, and records what changed.
// The package links no gRPC.
//
// Plan and Execute take the node as a reconstruct.Node, the value Scan
// took, and read the mount table only within the kubelet's dirs (and the
// users of its staging mounts, wherever they are mounted).
//
// It is not for rebuilding the state (package reconstruct), nor for
// deciding whether an orphan still runs (package liveness gives the scan
// its evidence of life).
package cleanup
