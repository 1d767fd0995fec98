package cleanup_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/mountscan"
)

const (
	storeBoot   = "3b0f5e2c-6d1a-4f7e-8c9b-0a1d2e3f4a5b"
	storePath   = "/var/lib/kubelet/plugins/kubernetes.io/csi/d/h/globalmount"
	storeVolume = "kubernetes.io/csi/d^vol-1"
)

var storeMount = cleanup.MountIdentity{ID: 812, UniqueID: 2147484500, Dev: mountscan.DevID{Major: 8, Minor: 16}, FSType: "ext4", Root: "/"}

func storeSeen(m cleanup.MountIdentity) map[string]cleanup.UnusedStaging {
	return map[string]cleanup.UnusedStaging{storePath: {UniqueName: storeVolume, Mount: m}}
}

// storeUpdate is one run's read and record: what a plan reads (Since)
// and Execute with Apply records (Record).
func storeUpdate(s cleanup.FileStore, boot string, unused map[string]cleanup.UnusedStaging, now time.Time) (map[string]time.Time, error) {
	since, err := s.Since(boot, unused, now)
	if err != nil {
		return nil, err
	}
	return since, s.Record(boot, unused, since)
}

// The store counts the same mount seen twice in one boot, never a path: a
// mount replaced at the path (whatever it has in common with the one
// before), a store of another boot (a restart, a backup of before it, a
// copy from another node) and one of an older volrecon, which recorded no
// mount, restart the clock at now.
func TestFileStoreCountsTheSameMountInTheSameBoot(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	replaced := func(change func(m *cleanup.MountIdentity)) cleanup.MountIdentity {
		m := storeMount
		change(&m)
		return m
	}
	for name, c := range map[string]struct {
		boot  string
		mount cleanup.MountIdentity
		want  time.Time
	}{
		"the same mount":                    {storeBoot, storeMount, t0},
		"another mount, same ID and device": {storeBoot, replaced(func(m *cleanup.MountIdentity) { m.UniqueID++ }), t1},
		"another device":                    {storeBoot, replaced(func(m *cleanup.MountIdentity) { m.Dev = mountscan.DevID{Major: 8, Minor: 32} }), t1},
		"another mount ID":                  {storeBoot, replaced(func(m *cleanup.MountIdentity) { m.ID++ }), t1},
		"another root":                      {storeBoot, replaced(func(m *cleanup.MountIdentity) { m.Root = "/sub" }), t1},
		"no unique ID now":                  {storeBoot, replaced(func(m *cleanup.MountIdentity) { m.UniqueID = 0 }), t1},
		"another boot, or another node's":   {"9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b", storeMount, t1},
		"a boot that could not be told":     {"", storeMount, t1},
	} {
		t.Run(name, func(t *testing.T) {
			s := cleanup.FileStore{Dir: t.TempDir()}
			since, err := storeUpdate(s, storeBoot, storeSeen(storeMount), t0)
			require.NoError(t, err)
			assert.Equal(t, t0, since[storePath])
			since, err = storeUpdate(s, c.boot, storeSeen(c.mount), t1)
			require.NoError(t, err)
			assert.Equal(t, c.want, since[storePath])
			since, err = storeUpdate(s, c.boot, storeSeen(c.mount), t1.Add(time.Hour))
			require.NoError(t, err)
			if c.boot != "" {
				assert.Equal(t, c.want, since[storePath], "the mount seen now is the one counted from now on")
			}
		})
	}
}

// A store file of an older volrecon (no boot, no mount) and a store whose
// entries are of another mount are read as "seen now", never as old
// enough; the file written afterwards records the boot and the mount.
func TestFileStoreOfAnOlderVolreconCountsNothing(t *testing.T) {
	s := cleanup.FileStore{Dir: t.TempDir()}
	old := `{"schemaVersion":"volrecon.v1","unusedSince":{"` + storePath + `":{"uniqueName":"` + storeVolume + `","since":"2020-01-01T00:00:00Z"}}}`
	require.NoError(t, os.WriteFile(s.Path(), []byte(old), 0o600))
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	since, err := storeUpdate(s, storeBoot, storeSeen(storeMount), now)
	require.NoError(t, err)
	assert.Equal(t, now, since[storePath])

	data, err := os.ReadFile(s.Path())
	require.NoError(t, err)
	var file struct {
		BootID      string `json:"bootID"`
		UnusedSince map[string]struct {
			Mount *cleanup.MountIdentity `json:"mount"`
		} `json:"unusedSince"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	assert.Equal(t, storeBoot, file.BootID)
	assert.Equal(t, &storeMount, file.UnusedSince[storePath].Mount)
}

// A store file that is no store fails within the read's bounds, naming
// the file, before anything is planned: a symlink to /dev/zero, a file
// larger than any store. Before, it was read whole, however large.
func TestFileStoreReadIsBounded(t *testing.T) {
	for name, mk := range map[string]func(path string){
		"a symlink to /dev/zero": func(path string) { require.NoError(t, os.Symlink("/dev/zero", path)) },
		"a huge sparse file": func(path string) {
			require.NoError(t, os.WriteFile(path, nil, 0o600))
			require.NoError(t, os.Truncate(path, 32<<20))
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := cleanup.FileStore{Dir: t.TempDir()}
			mk(s.Path())
			err := s.Check()
			require.ErrorIs(t, err, bounded.ErrTooLarge)
			assert.ErrorContains(t, err, s.Path())
			_, err = storeUpdate(s, storeBoot, storeSeen(storeMount), time.Now())
			assert.ErrorIs(t, err, bounded.ErrTooLarge)
		})
	}
}
