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
// A test's FakeMounter is what the test says it is, and two options make
// an agent's usual one scan as the kernel's table would (ForFakeMounter,
// both): WithRootEntry adds the entry at "/" that such a fake rarely has
// and without which the whole table is refused (every volume Uncertain);
// WithDevicesFromSources gives the entries of one absolute source (a block
// device, which a FakeMounter also records for a bind of a mount of it) one
// device number, so that a publish target is matched to the staging mount
// it is bound from: the staging mount is not reported leaked, and the CSI
// identity is recovered from it when the pod's vol_data.json is gone. What
// that cannot prove, and so the State's limitation still says: that an
// entry shows the whole filesystem (not a subdir), and that one source is
// one filesystem. Neither option is for the real Mounter.
//
// It lives apart from mountscan so that mountscan, which every other
// package uses, does not depend on mount-utils.
package mountutil
