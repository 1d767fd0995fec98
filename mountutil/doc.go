// Package mountutil connects volrecon to k8s.io/mount-utils, which
// kubelet-like agents already hold: a mount.Interface (the real Mounter or,
// in tests, a FakeMounter) becomes a mount source for reconstruct.Scan and
// cleanup, and a mountscan.Table converts back to mount-utils' types.
//
// What is lost: mount.Interface.List returns []mount.MountPoint, the fields
// of /proc/mounts: no mount ID, no parent, no major:minor, no root inside
// the filesystem, no propagation, mount and superblock options in one list.
// Without major:minor and root, bind mounts cannot be matched to the mount
// they show (reconstruct's staging matching, mountscan's Refs and
// SameSubtree), so a table from FromMountPoints gives every entry a device
// number of its own and an empty Root, which nothing in the kernel's table
// can have. reconstruct recognises that and says so in
// State.MountTable.Limitation: CSI identities are not recovered from the
// staging mount a pod mount binds, RootDiskBackedMount cannot be seen, and
// a staging mount that only binds name as used may be reported as leaked.
// Where an agent can, it should pass the real mountinfo instead
// (mountscan.ReadFile, or MountInfos to hand the same data back).
//
// It lives apart from mountscan so that mountscan, which every other
// package uses, does not depend on mount-utils.
package mountutil
