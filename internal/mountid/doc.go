// Package mountid says which mount is which in terms the kernel never
// reuses within a boot, without touching any filesystem: the boot ID, and
// the 64-bit unique mount ID (Linux 6.8+) of an entry of a mount table.
//
// A mount table's mount IDs (mountinfo's first field) and the anonymous
// device numbers of tmpfs, NFS or FUSE are given again to new mounts once
// the old ones are unmounted: an ID and a device seen twice may be two
// mounts. The unique mount ID is never given twice in one boot, and it is
// given in increasing order. Resolve maps a table's IDs to unique IDs with
// listmount(2) and statmount(2), which read the kernel's mount structures
// only: no path is looked up, so a hung NFS or FUSE mount cannot stall it.
// A mount the table shows is resolved only when it is proven to be the one
// the table saw: it existed before the table was read (its unique ID is at
// most the Watermark taken before), and it still holds that ID and device.
//
// It is for cleanup, which must act on, and count, the very mounts it
// judged. It reads the namespace of the calling process only: a table of
// another namespace (a host root, a file) is not resolved.
package mountid
