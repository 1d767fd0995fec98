//go:build linux

package mountscan

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestStatmountLayout: the Go structs are laid out as the kernel's
// (include/uapi/linux/mount.h), field by field.
func TestStatmountLayout(t *testing.T) {
	var sm statmountFixed
	assert.EqualValues(t, statmountFixedSize, unsafe.Sizeof(sm))
	for name, off := range map[string]uintptr{
		"size": unsafe.Offsetof(sm.size), "mnt_opts": unsafe.Offsetof(sm.mntOpts) - 4,
		"mask": unsafe.Offsetof(sm.mask) - 8, "sb_dev_major": unsafe.Offsetof(sm.sbDevMajor) - 16,
		"sb_dev_minor": unsafe.Offsetof(sm.sbDevMinor) - 20, "sb_magic": unsafe.Offsetof(sm.sbMagic) - 24,
		"sb_flags": unsafe.Offsetof(sm.sbFlags) - 32, "fs_type": unsafe.Offsetof(sm.fsType) - 36,
		"mnt_id": unsafe.Offsetof(sm.mntID) - 40, "mnt_parent_id": unsafe.Offsetof(sm.mntParentID) - 48,
		"mnt_id_old": unsafe.Offsetof(sm.mntIDOld) - 56, "mnt_parent_id_old": unsafe.Offsetof(sm.mntParentIDOld) - 60,
		"mnt_attr": unsafe.Offsetof(sm.mntAttr) - 64, "mnt_propagation": unsafe.Offsetof(sm.mntPropagation) - 72,
		"mnt_peer_group": unsafe.Offsetof(sm.mntPeerGroup) - 80, "mnt_master": unsafe.Offsetof(sm.mntMaster) - 88,
		"propagate_from": unsafe.Offsetof(sm.propagateFrom) - 96, "mnt_root": unsafe.Offsetof(sm.mntRoot) - 104,
		"mnt_point": unsafe.Offsetof(sm.mntPoint) - 108, "mnt_ns_id": unsafe.Offsetof(sm.mntNSID) - 112,
		"fs_subtype": unsafe.Offsetof(sm.fsSubtype) - 120, "sb_source": unsafe.Offsetof(sm.sbSource) - 124,
		"opt_num": unsafe.Offsetof(sm.optNum) - 128, "supported_mask": unsafe.Offsetof(sm.supportedMask) - 144,
	} {
		assert.Zero(t, off, "offset of %s", name)
	}
	var req mntIDReq
	assert.EqualValues(t, unix.MNT_ID_REQ_SIZE_VER1, unsafe.Sizeof(req))
	assert.EqualValues(t, 24, unsafe.Offsetof(req.nsID))
}

func TestAppendMountOptions(t *testing.T) {
	for attr, want := range map[uint64]string{
		unix.MOUNT_ATTR_RELATIME:    "rw,relatime",
		unix.MOUNT_ATTR_STRICTATIME: "rw",
		unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC |
			unix.MOUNT_ATTR_NOATIME | unix.MOUNT_ATTR_NODIRATIME | unix.MOUNT_ATTR_NOSYMFOLLOW | unix.MOUNT_ATTR_IDMAP: "ro,nosuid,nodev,noexec,noatime,nodiratime,nosymfollow,idmapped",
		unix.MOUNT_ATTR_NODIRATIME | unix.MOUNT_ATTR_NOEXEC:      "rw,noexec,nodiratime,relatime",
		unix.MOUNT_ATTR_STRICTATIME | unix.MOUNT_ATTR_NODIRATIME: "rw,nodiratime",
	} {
		assert.Equal(t, want, string(appendMountOptions(nil, attr)), "attr %#x", attr)
	}
}

func TestAppendSuperOptions(t *testing.T) {
	assert.Equal(t, "rw", string(appendSuperOptions(nil, 0, nil)))
	assert.Equal(t, "ro,size=4k", string(appendSuperOptions(nil, sbRdonly, []byte("size=4k"))))
	assert.Equal(t, "rw,sync,dirsync,lazytime,context=\"a,b\",x",
		string(appendSuperOptions(nil, sbSynchronous|sbDirsync|sbLazytime, []byte(`context="a,b",x`))))
	assert.Equal(t, "fuse.sshfs", string(appendFSType(nil, []byte("fuse"), []byte("sshfs"))))
	assert.Equal(t, "ext4", string(appendFSType(nil, []byte("ext4"), nil)))
}

// fakeAnswer builds what statmount(2) writes for one mount.
type fakeAnswer struct {
	fixed   statmountFixed
	strs    []byte
	noNul   bool // the last string lacks its terminator
	offPast bool // the root's offset is past the strings
}

func (a *fakeAnswer) str(bit uint64, field *uint32, s string) {
	if len(a.strs) == 0 {
		a.strs = []byte{0} // the kernel's empty string at offset 0
	}
	if s == "" {
		return
	}
	a.fixed.mask |= bit
	*field = uint32(len(a.strs))
	a.strs = append(append(a.strs, s...), 0)
}

func (a *fakeAnswer) bytes() []byte {
	if a.noNul {
		a.strs = a.strs[:len(a.strs)-1]
	}
	if a.offPast {
		a.fixed.mntRoot = uint32(len(a.strs) + 10)
	}
	b := make([]byte, statmountFixedSize, statmountFixedSize+len(a.strs))
	f := a.fixed
	f.size = uint32(statmountFixedSize + len(a.strs))
	copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&f)), statmountFixedSize))
	return append(b, a.strs...)
}

// newFakeAnswer is a typical answer: a shared, slave ext4 mount.
func newFakeAnswer() *fakeAnswer {
	a := &fakeAnswer{}
	f := &a.fixed
	f.mask = statmountSBBasic | statmountMntBasic | statmountPropagateFrom | statmountSupportedMask
	f.supportedMask = 0x7fff
	f.sbDevMajor, f.sbDevMinor = 259, 3
	f.sbFlags = sbLazytime
	f.mntID, f.mntParentID, f.mntIDOld, f.mntParentIDOld = 1<<31+7, 1<<31+2, 40, 22
	f.mntAttr = unix.MOUNT_ATTR_NOSUID
	f.mntPropagation = unix.MS_SHARED | unix.MS_SLAVE
	f.mntPeerGroup, f.mntMaster, f.propagateFrom = 5, 3, 2
	a.str(statmountMntRoot, &f.mntRoot, "/a dir\\x//deleted")
	a.str(statmountMntPoint, &f.mntPoint, "/mnt/with\nnewline")
	a.str(statmountFSType, &f.fsType, "ext4")
	a.str(statmountSBSource, &f.sbSource, "/dev/nvme0n1p3")
	a.str(statmountMntOpts, &f.mntOpts, "errors=remount-ro")
	return a
}

func addFake(t *testing.T, a *fakeAnswer) (Mount, error) {
	t.Helper()
	p := newStatmountPass(nil, true)
	p.begin(1)
	rd := &statmountReader{ids: []uint64{a.fixed.mntID}}
	if err := p.add(a.bytes(), 3, rd); err != nil {
		return Mount{}, err
	}
	require.Len(t, p.mounts, 1)
	return p.mounts[0], nil
}

// TestStatmountAnswerToMount: an answer gives every field as the mountinfo
// parser gives it for the line the kernel would print.
func TestStatmountAnswerToMount(t *testing.T) {
	m, err := addFake(t, newFakeAnswer())
	require.NoError(t, err)
	line := `40 22 259:3 /a\040dir\134x//deleted /mnt/with\012newline rw,nosuid,relatime shared:5 master:3 propagate_from:2 - ext4 /dev/nvme0n1p3 rw,lazytime,errors=remount-ro`
	want := MustFromLines(line).Mounts()[0]
	want.Line = 3
	assert.Equal(t, want, m)

	a := newFakeAnswer()
	a.fixed.propagateFrom = a.fixed.mntMaster // the kernel gives it; mountinfo prints it only when it differs
	a.fixed.mntPropagation = unix.MS_SLAVE | unix.MS_UNBINDABLE
	a.str(statmountFSSubtype, &a.fixed.fsSubtype, "sshfs")
	m, err = addFake(t, a)
	require.NoError(t, err)
	assert.Equal(t, []string{"master:3", "unbindable"}, m.OptionalFields)
	assert.Equal(t, "ext4.sshfs", m.FSType)
}

// TestStatmountAnswerRefused: an answer that cannot give every field is
// refused as unavailable; one of a mount no longer under the root is a
// change.
func TestStatmountAnswerRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*fakeAnswer)
		want   error
	}{
		"kernel without a supported mask": {func(a *fakeAnswer) { a.fixed.mask &^= statmountSupportedMask }, ErrStatmountUnavailable},
		"kernel without sb_source":        {func(a *fakeAnswer) { a.fixed.supportedMask &^= statmountSBSource }, ErrStatmountUnavailable},
		"no propagate_from":               {func(a *fakeAnswer) { a.fixed.mask &^= statmountPropagateFrom }, ErrStatmountUnavailable},
		"no mount point":                  {func(a *fakeAnswer) { a.fixed.mask &^= statmountMntPoint }, errChanged},
		"string past the end":             {func(a *fakeAnswer) { a.offPast = true }, ErrStatmountUnavailable},
		"string not terminated":           {func(a *fakeAnswer) { a.noNul = true }, ErrStatmountUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			a := newFakeAnswer()
			tc.change(a)
			_, err := addFake(t, a)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// TestStatmountForeignPropagateFrom: in another namespace, a slave whose
// master has a peer in the namespace has no propagate_from; one whose
// master has none makes the table unavailable.
func TestStatmountForeignPropagateFrom(t *testing.T) {
	rd := &statmountReader{foreign: true}
	p := &statmountPass{masters: []uint64{3}, peerGroups: []uint64{9, 3}}
	require.NoError(t, rd.checkPass(p))
	p = &statmountPass{masters: []uint64{3, 4}, peerGroups: []uint64{3}}
	require.ErrorIs(t, rd.checkPass(p), ErrStatmountUnavailable)
	rd.foreign = false
	require.NoError(t, rd.checkPass(p), "in the caller's namespace the kernel computes it")
}

func TestSyscallUnavailable(t *testing.T) {
	for _, e := range []unix.Errno{unix.ENOSYS, unix.EPERM, unix.EACCES, unix.EINVAL, unix.E2BIG, unix.ENOENT} {
		assert.ErrorIs(t, syscallUnavailable("listmount", e), ErrStatmountUnavailable, e.Error())
		assert.ErrorIs(t, syscallUnavailable("listmount", e), e)
	}
	assert.NotErrorIs(t, syscallUnavailable("statmount", unix.ENOMEM), ErrStatmountUnavailable)
}
