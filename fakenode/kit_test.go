package fakenode_test

import (
	"errors"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
)

// mountPoints lists the mount points of the node's table, in its order.
func mountPoints(t *testing.T, n *fakenode.Node) []string {
	t.Helper()
	table, err := n.Node().MountTable.Read(t.Context())
	require.NoError(t, err)
	var out []string
	for _, m := range table.Mounts() {
		out = append(out, m.MountPoint)
	}
	return out
}

// Unmount is the kernel's umount on the kit's table: the topmost entry
// goes, EINVAL where nothing is mounted, EBUSY under a mount on top, the
// hook first; what it unmounted is listed, the path's check error goes.
func TestUnmount(t *testing.T) {
	const vol = fakenode.DefaultRootDir + "/pods/" + fakenode.UID1 + "/volumes/kubernetes.io~secret/creds"
	const sub = vol + "/sub"
	tmpfs := func(id, p string) string { return id + " 1 0:" + id + " / " + p + " rw - tmpfs tmpfs rw" }
	hookErr := errors.New("the driver holds it")
	for _, tc := range []struct {
		name      string
		lines     []string
		hook      func(calls *[]string) fakenode.UnmountFunc
		unmount   []string // in order; the last one's error is wantErr
		wantErr   error
		wantTable []string // mount points left, "/" aside
		unmounted []string
	}{
		{name: "the topmost of two", lines: []string{tmpfs("70", vol), tmpfs("71", vol)}, unmount: []string{vol},
			wantTable: []string{vol}, unmounted: []string{vol}},
		{name: "a path given unclean", lines: []string{tmpfs("70", vol)}, unmount: []string{vol + "/"},
			unmounted: []string{vol}},
		{name: "nothing mounted", lines: nil, unmount: []string{vol}, wantErr: syscall.EINVAL},
		{name: "a mount below it on top", lines: []string{tmpfs("70", vol), tmpfs("71", sub)}, unmount: []string{vol},
			wantErr: syscall.EBUSY, wantTable: []string{vol, sub}},
		{name: "the mount below first", lines: []string{tmpfs("70", vol), tmpfs("71", sub)}, unmount: []string{sub, vol},
			unmounted: []string{sub, vol}},
		{name: "a mount below it underneath", lines: []string{tmpfs("71", sub), tmpfs("70", vol)}, unmount: []string{vol},
			wantTable: []string{sub}, unmounted: []string{vol}},
		{name: "the hook fails", lines: []string{tmpfs("70", vol)}, unmount: []string{vol}, wantErr: hookErr, wantTable: []string{vol},
			hook: func(*[]string) fakenode.UnmountFunc { return func(string) error { return hookErr } }},
		{name: "the hook is called with the path", lines: []string{tmpfs("70", vol)}, unmount: []string{vol}, unmounted: []string{vol},
			hook: func(calls *[]string) fakenode.UnmountFunc {
				return func(p string) error { *calls = append(*calls, p); return nil }
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakenode.New(t)
			n.Dir(sub)
			for _, l := range tc.lines {
				n.Mount(l)
			}
			var calls []string
			if tc.hook != nil {
				n.UnmountFunc = tc.hook(&calls)
			}
			n.MountCheckErrors = map[string]error{vol: syscall.ENOTCONN}
			var err error
			for _, p := range tc.unmount {
				err = n.Unmount(p)
			}
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.ErrorContains(t, err, vol, "the error names the path")
				assert.Contains(t, n.MountCheckErrors, vol, "not unmounted: still broken")
			} else {
				require.NoError(t, err)
				assert.NotContains(t, n.MountCheckErrors, vol)
			}
			assert.Equal(t, append([]string{"/"}, tc.wantTable...), mountPoints(t, n))
			assert.Equal(t, tc.unmounted, n.Unmounted())
			if tc.hook != nil && tc.wantErr == nil {
				assert.Equal(t, []string{vol}, calls)
			}
		})
	}
}

// RemoveMount takes an entry out as the test says, mounts on top or not,
// without the hook and without listing it; where nothing is mounted, or
// the table is a fixture's, it fails the test.
func TestRemoveMount(t *testing.T) {
	n := fakenode.New(t)
	vol := n.Volume(fakenode.UID1, "kubernetes.io~secret", "creds")
	n.Mount("70 1 0:70 / " + vol + " rw - tmpfs tmpfs rw").Mount("71 1 0:71 / " + vol + "/sub rw - tmpfs tmpfs rw")
	n.UnmountFunc = func(string) error { return errors.New("not called") }

	n.RemoveMount(vol)
	assert.Equal(t, []string{"/", vol + "/sub"}, mountPoints(t, n))
	assert.Empty(t, n.Unmounted())
	assert.Panics(t, func() { fakenode.New(fatalTB{t}).RemoveMount(vol) }, "nothing mounted")
	assert.Panics(t, func() {
		fakenode.FixtureNode(fatalTB{t}, fakenode.Fixtures(), "ebs-current.txtar").RemoveMount(fakenode.DefaultRootDir)
	}, "a fixture's table is its own")
}

// cleanup.Execute, given the kit's ExecOptions, unmounts an orphan's
// volume from the kit's table and then removes the dirs; when the unmount
// fails (UnmountFunc), or the table cannot be read since the plan
// (MountTableError), the volume and its pod dir are kept.
func TestExecuteUnmountsThroughTheKit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hook      fakenode.UnmountFunc
		tableErr  error
		wantErr   error
		unmounted bool
	}{
		{name: "unmounted", unmounted: true},
		{name: "the unmount fails", hook: func(string) error { return syscall.EBUSY }, wantErr: syscall.EBUSY},
		{name: "the table cannot be read", tableErr: syscall.EIO, wantErr: syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakenode.New(t)
			vol := n.Volume(fakenode.UID2, "kubernetes.io~secret", "creds")
			n.Mount("70 1 0:70 / " + vol + " rw - tmpfs tmpfs rw")
			n.UnmountFunc = tc.hook
			opts := n.ScanOptions()
			opts.ActivePods, opts.LifeChecker = reconstruct.PodList{fakenode.UID1}, fakenode.Life{}
			st := n.Scan(opts)
			plan := cleanup.Plan(n.Context(), st, cleanup.Options{Node: n.Node(), Unmount: true})
			require.True(t, slices.ContainsFunc(plan.Actions, func(a cleanup.Action) bool { return a.Action == cleanup.Unmount }),
				"plan: %+v", plan.Actions)

			n.MountTableError = tc.tableErr
			exec := n.ExecOptions()
			exec.Apply = true
			results := cleanup.Execute(n.Context(), plan, exec)
			n.MountTableError = nil
			pod := n.OnDisk(n.Path("pods", fakenode.UID2))
			if tc.unmounted {
				assert.Equal(t, []string{vol}, n.Unmounted())
				assert.Equal(t, []string{"/"}, mountPoints(t, n))
				assert.NoDirExists(t, pod, "results: %+v", results)
				return
			}
			assert.Empty(t, n.Unmounted())
			assert.Equal(t, []string{"/", vol}, mountPoints(t, n))
			assert.DirExists(t, n.OnDisk(vol), "results: %+v", results)
			require.NotEmpty(t, results)
			assert.ErrorIs(t, results[0].Err, tc.wantErr)
		})
	}
}

// MountTableError fails every read of the table, of a node made by New and
// of a fixture's: the scan returns ErrMountTable wrapping it, every volume
// Uncertain; cleared, the table reads again.
func TestMountTableError(t *testing.T) {
	injected := errors.New("input/output error")
	for _, tc := range []struct {
		name string
		node func(t *testing.T) *fakenode.Node
	}{
		{name: "New", node: func(t *testing.T) *fakenode.Node {
			n := fakenode.New(t)
			vol := n.Pod(fakenode.UID1).CSIVolume("pvc-1", "ebs.csi.aws.com", "vol-0abc")
			return n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Staging, vol.Target)
		}},
		{name: "fixture", node: func(t *testing.T) *fakenode.Node {
			return fakenode.FixtureNode(t, fakenode.Fixtures(), "ebs-current.txtar")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.node(t)
			n.MountTableError = injected
			st, err := reconstruct.Scan(n.Context(), n.ScanOptions())
			require.ErrorIs(t, err, reconstruct.ErrMountTable)
			require.ErrorIs(t, err, injected)
			require.NotNil(t, st)
			require.NotEmpty(t, st.Volumes)
			for _, v := range st.Volumes {
				assert.Equal(t, reconstruct.Uncertain, v.State, "%s of %s", v.Name, v.PodUID)
			}
			_, err = n.PlanOptions().MountTable.Read(t.Context())
			assert.ErrorIs(t, err, injected, "the plan's and the executor's reads fail too")

			n.MountTableError = nil
			st = n.Scan(n.ScanOptions())
			assert.True(t, slices.ContainsFunc(st.Volumes, func(v reconstruct.Volume) bool { return v.State == reconstruct.Mounted }))
		})
	}
}

// MountCheckErrors fail the checks of their paths, probed without asking:
// a broken mount is a CorruptedMount, a check refused says why and stays
// Mounted, ErrHung is a HungMount and Uncertain; a fixture's node takes
// them before its own probe.
func TestMountCheckErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fixture string
		err     error
		state   reconstruct.VolumeState
		finding reconstruct.FindingKind
		reason  string
	}{
		{name: "ENOTCONN", err: syscall.ENOTCONN, state: reconstruct.Mounted, finding: reconstruct.CorruptedMount,
			reason: "transport endpoint is not connected"},
		{name: "ESTALE", err: syscall.ESTALE, state: reconstruct.Mounted, finding: reconstruct.CorruptedMount, reason: "stale"},
		{name: "EACCES", err: syscall.EACCES, state: reconstruct.Mounted, reason: "permission denied"},
		{name: "hung", err: fakenode.ErrHung, state: reconstruct.Uncertain, finding: reconstruct.HungMount, reason: "hung"},
		{name: "fixture", fixture: "ebs-current.txtar", err: syscall.EIO, state: reconstruct.Mounted,
			finding: reconstruct.CorruptedMount, reason: "input/output error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n *fakenode.Node
			uid, name := fakenode.UID1, "pvc-1"
			if tc.fixture != "" {
				n = fakenode.FixtureNode(t, fakenode.Fixtures(), tc.fixture)
				uid, name = "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", "pvc-5f1c2b7a-8d3e-4b6f-9a0c-1e2d3f4a5b6c"
			} else {
				n = fakenode.New(t)
				vol := n.Pod(uid).CSIVolume(name, "ebs.csi.aws.com", "vol-0abc")
				n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Target) // one mount: one probe
			}
			target := fakenode.VolumeNamed(t, n.Scan(n.ScanOptions()), uid, name).CheckedPath
			n.MountCheckErrors = map[string]error{target: tc.err}
			opts := n.ScanOptions()
			assert.True(t, opts.Probe, "a node with check errors is probed")
			opts.ProbeTimeout = time.Second // the hung probe waits it out

			st := n.Scan(opts)
			v := fakenode.VolumeNamed(t, st, uid, name)
			assert.Equal(t, tc.state, v.State)
			assert.Contains(t, v.Reason, tc.reason)
			if tc.finding != "" {
				found := fakenode.FindingsOf(st, tc.finding)
				require.Len(t, found, 1, "findings: %+v", st.Findings)
				assert.Equal(t, target, found[0].Path)
			} else {
				assert.Contains(t, v.Reason, target, "the error names the path")
				assert.Empty(t, fakenode.FindingsOf(st, reconstruct.CorruptedMount))
			}
		})
	}
}

// A raw block volume, as the kubelet lays it out, mapped from its device
// node: the State finds it Mounted at its publish file, with its identity,
// map dir and staging dir; unmapped, it is not mounted and its staging is
// held (Uncertain) for the driver.
func TestCSIBlockVolume(t *testing.T) {
	const driver, handle = "ebs.csi.aws.com", "vol-0def"
	const csiDir = fakenode.DefaultRootDir + "/plugins/kubernetes.io/csi/volumeDevices"
	for _, tc := range []struct {
		name         string
		mapped       bool
		state        reconstruct.VolumeState
		stagingState reconstruct.VolumeState
	}{
		{name: "mapped", mapped: true, state: reconstruct.Mounted, stagingState: reconstruct.Mounted},
		{name: "staged only", state: reconstruct.Unmounted, stagingState: reconstruct.Uncertain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakenode.New(t)
			blk := n.Pod(fakenode.UID1).CSIBlockVolume("pvc-2", driver, handle)
			assert.Equal(t, fakenode.CSIBlockVolume{
				Link:    fakenode.DefaultRootDir + "/pods/" + fakenode.UID1 + "/volumeDevices/kubernetes.io~csi/pvc-2",
				Publish: csiDir + "/publish/pvc-2/" + fakenode.UID1, Map: csiDir + "/pvc-2/dev/" + fakenode.UID1,
				VolData: csiDir + "/pvc-2/data/vol_data.json", Staging: csiDir + "/staging/pvc-2"}, blk)
			link, err := os.Readlink(n.OnDisk(blk.Link))
			require.NoError(t, err, "the pod's map file is a symlink")
			assert.Equal(t, blk.Publish, link, "to the publish file, a host path, as the kubelet links it")
			assert.FileExists(t, n.OnDisk(blk.Publish))
			assert.FileExists(t, n.OnDisk(blk.Map))
			if tc.mapped {
				n.BindDeviceNode("nvme2n1", blk.Publish, blk.Map)
			}

			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID1}})
			v := fakenode.VolumeNamed(t, st, fakenode.UID1, "pvc-2")
			assert.Equal(t, tc.state, v.State, v.Reason)
			assert.Equal(t, "Block", string(v.Mode))
			assert.Equal(t, blk.Publish, v.CheckedPath)
			require.NotNil(t, v.CSI)
			assert.False(t, v.CSI.Recovered)
			assert.Equal(t, "kubernetes.io/csi/"+driver+"^"+handle, v.UniqueName)
			assert.Equal(t, blk.Staging, v.StagingPath)
			if tc.mapped {
				assert.Equal(t, csiDir+"/pvc-2/dev", v.DeviceMountPath)
				assert.Equal(t, "/nvme2n1", v.Mount.Root)
			}
			require.Len(t, st.GlobalMounts, 1)
			assert.Equal(t, blk.Staging, st.GlobalMounts[0].Path)
			assert.Equal(t, tc.stagingState, st.GlobalMounts[0].State, st.GlobalMounts[0].Reason)
			assert.Equal(t, []string{v.UniqueName}, st.VolumesInUse)
		})
	}
}

// A volume in the layout of Kubernetes <= 1.23: staged at pv/<name>, it is
// Mounted with that staging, a LegacyLayout. Without the pod's
// vol_data.json it is Uncertain: a legacy staging dir is named by the PV,
// so its mount proves no identity.
func TestLegacyCSIVolume(t *testing.T) {
	for _, tc := range []struct {
		name      string
		noVolData bool
		state     reconstruct.VolumeState
		reason    string
	}{
		{name: "with its vol_data.json", state: reconstruct.Mounted, reason: "1 entry at the path"},
		{name: "without", noVolData: true, state: reconstruct.Uncertain, reason: "does not prove an identity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakenode.New(t)
			vol := n.Pod(fakenode.UID1).LegacyCSIVolume("pvc-3", "ebs.csi.aws.com", "vol-0ghi")
			assert.Equal(t, fakenode.DefaultRootDir+"/plugins/kubernetes.io/csi/pv/pvc-3/globalmount", vol.Staging)
			n.MountDevice("259:5", "ext4", "/dev/nvme3n1", vol.Staging, vol.Target)
			if tc.noVolData {
				n.Remove(vol.VolData)
			}

			st := n.Scan(reconstruct.Options{})
			v := fakenode.VolumeNamed(t, st, fakenode.UID1, "pvc-3")
			assert.Equal(t, tc.state, v.State)
			assert.Contains(t, v.Reason, tc.reason)
			require.Len(t, st.GlobalMounts, 1)
			g := st.GlobalMounts[0]
			assert.Equal(t, vol.Staging, g.Path)
			assert.Equal(t, "legacy", string(g.Layout))
			assert.Equal(t, "vol-0ghi", g.VolumeHandle, "from the staging's vol_data.json")
			assert.Equal(t, "pvc-3", g.SpecName)
			if !tc.noVolData {
				assert.Equal(t, vol.Staging, v.DeviceMountPath)
				assert.Equal(t, "legacy", string(v.Layout))
				assert.Equal(t, []string{fakenode.UID1}, g.PodUIDs)
			}
			legacy := fakenode.FindingsOf(st, reconstruct.LegacyLayout)
			require.Len(t, legacy, 1)
			assert.Equal(t, vol.Staging, legacy[0].Path)
		})
	}
}
