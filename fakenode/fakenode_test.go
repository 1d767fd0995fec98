package fakenode_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/fixture"
	"github.com/volrecon/volrecon/reconstruct"
)

// An agent's usual node, in a few lines: a CSI volume staged and published
// from one device, an emptyDir on the root disk. The scan sees it as the
// kernel's table would show it.
func TestNewScansAFakeNode(t *testing.T) {
	n := fakenode.New(t)
	pod := n.Pod(fakenode.UID1)
	vol := pod.CSIVolume("pvc-1", "ebs.csi.aws.com", "vol-0abc")
	pod.Volume("kubernetes.io/empty-dir", "cache")
	n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Staging, vol.Target)

	st := n.Scan(reconstruct.Options{})
	assert.Equal(t, fakenode.DefaultRootDir, st.RootDir)
	assert.Equal(t, fakenode.MountTablePath, st.MountTable.Path)
	assert.Empty(t, st.MountTable.Limitation, "a table of mountinfo lines has devices and roots")
	csi := fakenode.VolumeNamed(t, st, fakenode.UID1, "pvc-1")
	assert.Equal(t, reconstruct.Mounted, csi.State)
	assert.Equal(t, "kubernetes.io/csi/ebs.csi.aws.com^vol-0abc", csi.UniqueName)
	assert.Equal(t, vol.Staging, csi.DeviceMountPath)
	assert.Equal(t, reconstruct.Unmounted, fakenode.VolumeNamed(t, st, fakenode.UID1, "cache").State)
	assert.Equal(t, []string{csi.UniqueName}, st.VolumesInUse)
	assert.Empty(t, st.Findings)
}

// Without the pod's vol_data.json, the identity is recovered from the one
// staging mount the target is bound from: the kit's staging dir and its
// vol_data.json are the kubelet's.
func TestCSIVolumeIdentityRecoveredFromItsStaging(t *testing.T) {
	n := fakenode.New(t)
	vol := n.Pod(fakenode.UID1).CSIVolume("pvc-1", "ebs.csi.aws.com", "vol-0abc")
	n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Staging, vol.Target)
	n.Remove(vol.VolData)

	st := n.Scan(reconstruct.Options{})
	csi := fakenode.VolumeNamed(t, st, fakenode.UID1, "pvc-1")
	assert.Equal(t, reconstruct.Mounted, csi.State)
	require.NotNil(t, csi.CSI)
	assert.True(t, csi.CSI.Recovered)
	assert.Equal(t, "vol-0abc", csi.CSI.VolumeHandle)
	assert.Len(t, fakenode.FindingsOf(st, reconstruct.MissingVolumeData), 1)
	assert.Empty(t, fakenode.FindingsOf(st, reconstruct.LeakedGlobalMount))
}

// The table is read afresh: a mount added after the scan is what the
// executor's re-read sees, and an unmount-free plan of an orphan keeps it.
func TestTheTableIsReadAfresh(t *testing.T) {
	n := fakenode.New(t)
	tmp := n.Volume(fakenode.UID2, "kubernetes.io~secret", "creds")
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID1}})
	assert.Equal(t, reconstruct.Unmounted, fakenode.VolumeNamed(t, st, fakenode.UID2, "creds").State)

	n.Mount("400 1 0:70 / " + tmp + " rw - tmpfs tmpfs rw")
	plan := cleanup.Plan(n.Context(), st, n.PlanOptions())
	results := cleanup.Execute(n.Context(), plan, cleanup.ExecOptions{Node: n.Node(), Apply: true})
	_, err := os.Stat(n.OnDisk(tmp))
	assert.NoError(t, err, "the dir mounted since the scan is kept: %+v", results)
}

// A line that the kernel could not have written is refused at once.
func TestMountRefusesABadLine(t *testing.T) {
	_, err := reconstruct.Scan(t.Context(), reconstruct.Options{Node: fakenode.New(t).Node()})
	require.NoError(t, err, "the root line alone is a live table")
	assert.Panics(t, func() { fakenode.New(fatalTB{t}).Mount("not a mountinfo line") })
}

// fatalTB turns a Fatal into a panic, so a test can see it.
type fatalTB struct{ testing.TB }

func (f fatalTB) Fatal(args ...any)                 { panic(args) }
func (f fatalTB) Fatalf(format string, args ...any) { panic(format) }

// Every fixture of the repository, loaded from the embedded copy, scans
// through the kit to its golden State, with every option the format has.
func TestEveryFixtureLoadsWithItsOptions(t *testing.T) {
	names, err := fs.Glob(fakenode.Fixtures(), "*.txtar")
	require.NoError(t, err)
	onDisk, err := filepath.Glob("testdata/*.txtar")
	require.NoError(t, err)
	require.Len(t, names, len(onDisk), "the embedded fixtures are testdata/*.txtar")
	options := map[string]bool{}
	for _, name := range names {
		t.Run(strings.TrimSuffix(name, ".txtar"), func(t *testing.T) {
			f, err := fakenode.LoadFixture(fakenode.Fixtures(), name)
			require.NoError(t, err)
			for k := range f.Options() {
				options[k] = true
			}
			n := f.NewNode(t)
			st, err := reconstruct.Scan(n.Context(), n.ScanOptions())
			got := fakenode.MarshalGolden(t, st)
			if err != nil && !(errors.Is(err, reconstruct.ErrMountTable) && st != nil) { // a table not read: the State says it
				got = fakenode.MarshalGolden(t, map[string]string{"error": err.Error()})
			}
			f.CheckGolden(t, fakenode.SectionGolden, got, false)
		})
	}
	for _, k := range []string{"root-dir", "root-dir-alias", "mountinfo-reads", "probe", "probe-error", "probe-hang", "block-device",
		"active-pods", "active-pods-error", "plan-unmount", "attach-free-drivers", "evidence-of-life"} {
		assert.True(t, options[k], "no fixture uses option %s", k)
	}
}

// A fixture's node is where the fixture says: its root dir, its plan options.
func TestFixtureNode(t *testing.T) {
	n := fakenode.FixtureNode(t, fakenode.Fixtures(), "c26-hung-nfs.txtar")
	assert.Equal(t, fakenode.DefaultRootDir, n.RootDir())
	opts := n.ScanOptions()
	assert.True(t, opts.Probe)
	assert.NotNil(t, opts.ActivePods)
	assert.True(t, n.PlanOptions().Unmount)
	st := n.Scan(opts)
	assert.Len(t, fakenode.FindingsOf(st, reconstruct.HungMount), 1)
	plan := cleanup.Plan(n.Context(), st, n.PlanOptions())
	require.NotEmpty(t, plan.Actions)
	for _, a := range plan.Actions {
		assert.Equal(t, cleanup.Keep, a.Action, "a hung volume's pod is kept whole: %s", a.Path)
	}
	assert.Panics(t, func() {
		fakenode.FixtureNode(fatalTB{t}, fakenode.Fixtures(), "c26-hung-nfs.txtar").Mount(fakenode.RootLine)
	},
		"a fixture's table is its own")
}

// On real mounts the paths are real and the table is this process's.
func TestOnRealMounts(t *testing.T) {
	n := fakenode.OnRealMounts(t)
	assert.Empty(t, n.HostRoot())
	dir := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "cache")
	assert.DirExists(t, dir)
	assert.Equal(t, dir, n.OnDisk(dir))
	st := n.Scan(reconstruct.Options{})
	assert.Equal(t, "/proc/self/mountinfo", st.MountTable.Path)
	assert.Equal(t, reconstruct.Unmounted, fakenode.VolumeNamed(t, st, fakenode.UID1, "cache").State)
}

// The kit's names are the format's.
func TestTheKitSpeaksTheFormat(t *testing.T) {
	assert.Equal(t, fixture.DemoPath, fakenode.MountTablePath)
	for kit, format := range map[string]string{fakenode.SectionMountInfo: fixture.SectionMountInfo, fakenode.SectionTree: fixture.SectionTree,
		fakenode.SectionOptions: fixture.SectionOptions, fakenode.SectionGolden: fixture.SectionGolden, fakenode.SectionPlan: fixture.SectionPlan} {
		assert.Equal(t, format, kit)
	}
	_, err := fakenode.ParseFixture([]byte("-- a --\n-- a --\n"))
	assert.ErrorIs(t, err, fakenode.ErrFormat)
}
