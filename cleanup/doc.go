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
// ExecOptions.Apply is set).
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
//   - Execute holds the pods dir open and resolves every action beneath
//     it with RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS and RESOLVE_NO_XDEV,
//     unmounts only a mount whose ID the table has at the path, checks
//     each action against a mount table re-read whenever the kernel
//     reports a change, and stops when the pods dir changes, so a change
//     since the plan skips the action instead of redirecting it.
//
// NodeUnpublish and NodeUnstage are reported as NeedsDriver actions, unless
// Options.CSITeardown hands Plan the evidence that a publish target the
// kubelet cannot tear down (its pod's vol_data.json is gone), or a staging
// mount no pod uses, may go: then Plan plans NodeUnpublish and NodeUnstage
// actions, which Execute makes through package csinode, once each, after
// checking the mount table again, and records what changed.
//
// It is not for rebuilding the state (package reconstruct), nor for
// gathering that evidence (the volrecon command reads every mount namespace).
package cleanup
