//go:build unix

package podsdir

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// mountPointSpec builds a node where every path Scan must never open
// (possible mount points and bind-mount targets) is listed in watched.
// Those that are dirs on a real node get dirKind, files get fileKind.
func mountPointSpec(dirKind, fileKind string) (spec, watched []string) {
	p := pods + "/" + uid1
	vd := csiDir + "/volumeDevices"
	add := func(kind, path string) {
		spec = append(spec, kind+" "+path)
		watched = append(watched, path)
	}
	add(dirKind, p+"/volumes/kubernetes.io~csi/pvc-1/mount")
	add(dirKind, p+"/volumes/kubernetes.io~nfs/share") // a FIFO here is a Problem, never opened
	add(dirKind, p+"/volume-subpaths/share/app/0")
	add(fileKind, p+"/volumeDevices/kubernetes.io~csi/pvc-blk")
	add(dirKind, csiDir+"/ebs.csi.aws.com/"+StagingHash("vol-0abc")+"/globalmount")
	add(dirKind, csiDir+"/pv/pvc-old/globalmount")
	add(fileKind, vd+"/pvc-blk/dev/"+uid1)
	add(dirKind, vd+"/staging/pvc-blk")
	add(fileKind, vd+"/publish/pvc-blk/"+uid1)
	add(fileKind, vd+"/publish/pvc-legacy")
	spec = append(spec,
		"f "+p+"/volumes/kubernetes.io~csi/pvc-1/vol_data.json "+podVolData,
		"d "+vd+"/pvc-blk/data",
	)
	return spec, watched
}

// TestScanDoesNotOpenFIFOs is a tripwire: opening a FIFO for reading blocks
// until a writer comes, so a Scan that opens (or lists) any possible mount
// point, or a vol_data.json that is a FIFO, never returns.
func TestScanDoesNotOpenFIFOs(t *testing.T) {
	spec, fifos := mountPointSpec("p", "p")
	p := pods + "/" + uid1
	more := []string{
		p + "/etc-hosts",
		p + "/volumes/kubernetes.io~csi/pvc-1/extra",
		p + "/volumes/kubernetes.io~csi/pvc-2/vol_data.json",
		csiDir + "/pv/pvc-old/vol_data.json",
		csiDir + "/volumeDevices/pvc-blk/data/vol_data.json",
	}
	for _, f := range more {
		spec = append(spec, "p "+f)
	}
	fifos = append(fifos, more...)
	root := build(t, spec...)
	t.Cleanup(func() {
		// Release a Scan stuck in open(2): a non-blocking writer unblocks a reader.
		for _, f := range fifos {
			if fd, err := unix.Open(filepath.Join(root, f), unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				_ = unix.Close(fd)
			}
		}
	})

	type result struct {
		inv *Inventory
		err error
	}
	done := make(chan result, 1)
	go func() {
		inv, err := Scan(context.Background(), Options{RootDir: kroot, HostRoot: root})
		done <- result{inv, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Scan blocked: it opened a FIFO standing in for a mount point")
	}
	require.NoError(t, r.err)
	pod := podByUID(t, r.inv, uid1)
	byName := map[string]Volume{}
	for _, v := range pod.Volumes {
		byName[v.Name] = v
	}
	require.Contains(t, byName, "pvc-1")
	require.NotNil(t, byName["pvc-1"].MountDir)
	assert.Equal(t, TypeOther, byName["pvc-1"].MountDir.Type, "mount typed from readdir, not stat'ed")
	assert.Equal(t, VolDataOK, byName["pvc-1"].VolData.State)
	assert.Equal(t, VolDataCorrupt, byName["pvc-2"].VolData.State, "a FIFO vol_data.json is corrupt, not opened")
	assert.Equal(t, TypeOther, byName["pvc-blk"].Type)
	assert.Equal(t, TypeOther, pod.Subpaths[0].Type)
	// os.ReadDir opens with O_DIRECTORY, so listing a FIFO fails with ENOTDIR
	// instead of blocking: that would show up as an Unreadable problem.
	// A FIFO where a volume dir, a publish target or a staging target
	// belongs is reported from the listing alone.
	csi := "/var/lib/kubelet/plugins/kubernetes.io/csi/"
	assert.Equal(t, map[string]ProblemKind{
		p + "/volumes/kubernetes.io~nfs/share":                                                               ProblemNotDirectory,
		p + "/volumes/kubernetes.io~csi/pvc-1/mount":                                                         ProblemNotDirectory,
		csi + "ebs.csi.aws.com/11da287504886785318934971b34e85e3f26952afa0a2741b3bd2e9e771cc7b2/globalmount": ProblemNotDirectory,
		csi + "pv/pvc-old/globalmount":                                                                       ProblemNotDirectory,
	}, problemKinds(r.inv))
	for _, sd := range r.inv.Staging {
		if sd.Layout == LayoutLegacy || sd.Mode == Block {
			assert.Equal(t, VolDataCorrupt, sd.VolData.State, sd.Dir)
		}
	}
}

// TestScanDoesNotTouchMountPoints watches every possible mount point (here
// real dirs and files) with inotify and requires that Scan never opens or
// reads them or anything inside them.
func TestScanDoesNotTouchMountPoints(t *testing.T) {
	spec, watched := mountPointSpec("d", "f")
	p := pods + "/" + uid1
	// Content inside the mount points: a scan that descends would open it.
	spec = append(spec,
		"f "+p+"/volumes/kubernetes.io~nfs/share/file x",
		"d "+p+"/volumes/kubernetes.io~csi/pvc-1/mount/sub",
		"f "+csiDir+"/pv/pvc-old/globalmount/vol_data.json "+stagingVolData,
	)
	root := build(t, spec...)

	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	byWatch := map[int32]string{}
	for _, w := range watched {
		wd, err := unix.InotifyAddWatch(fd, filepath.Join(root, w), unix.IN_OPEN|unix.IN_ACCESS)
		require.NoError(t, err, w)
		byWatch[int32(wd)] = w
	}

	inv := scanTree(t, root)
	require.Len(t, inv.Pods, 1)
	assert.Len(t, inv.Staging, 3)
	assert.Empty(t, readInotify(t, fd, byWatch), "Scan opened or read a possible mount point")

	// Positive control: the watches do fire.
	_, err = os.ReadDir(filepath.Join(root, csiDir, "pv/pvc-old/globalmount"))
	require.NoError(t, err)
	assert.NotEmpty(t, readInotify(t, fd, byWatch), "inotify tripwire is not armed")
}

// readInotify drains fd and returns "path/name" of each event.
func readInotify(t *testing.T, fd int, byWatch map[int32]string) []string {
	t.Helper()
	var events []string
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return events
		}
		require.NoError(t, err)
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
			name := string(buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen])
			events = append(events, filepath.Join(byWatch[wd], trimNUL(name)))
			off += unix.SizeofInotifyEvent + nameLen
		}
	}
}

func trimNUL(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return s[:i]
		}
	}
	return s
}
