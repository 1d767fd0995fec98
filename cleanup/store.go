package cleanup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/volrecon/volrecon/internal/atomicfile"
	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/reconstruct"
)

// FileStoreName is the file of a FileStore in its dir.
const FileStoreName = "csi-unused-staging.json"

// FileStore is an UnusedStagingStore in one JSON file, Dir/FileStoreName,
// of volrecon's own (the CLI's --state-dir). It is replaced atomically, so
// a run that dies midway leaves the previous record.
//
// It records the boot it was written in and, for each staging path, the
// very mount seen there (UnusedStaging.Mount). An entry counts only for
// that mount in that boot: a mount replaced at the path, a file of another
// boot (a restart, a backup restored, a copy from another node) or one of
// an older volrecon, which recorded no mount, restarts the clock at now.
type FileStore struct {
	Dir string
}

// storeFile is the file's content: when each staging mount was first seen unused.
type storeFile struct {
	SchemaVersion string                `json:"schemaVersion"`
	BootID        string                `json:"bootID,omitempty"`
	UnusedSince   map[string]storeEntry `json:"unusedSince"`
}

type storeEntry struct {
	UniqueName string    `json:"uniqueName"`
	Since      time.Time `json:"since"`
	// Mount is the mount seen; nil in a file of an older volrecon.
	Mount *MountIdentity `json:"mount,omitempty"`
}

// Path is the store's file.
func (s FileStore) Path() string { return filepath.Join(s.Dir, FileStoreName) }

// Check reads the store: an error when the file exists but cannot be read
// or decoded (remove it to start afresh).
func (s FileStore) Check() error {
	_, err := s.load()
	return err
}

// Since implements UnusedStagingStore: it reads the file and changes
// nothing.
func (s FileStore) Since(bootID string, unused map[string]UnusedStaging, now time.Time) (map[string]time.Time, error) {
	old, err := s.load()
	if err != nil {
		return nil, err
	}
	sameBoot := bootID != "" && old.BootID == bootID
	since := make(map[string]time.Time, len(unused))
	for path, u := range unused {
		e, seen := old.UnusedSince[path]
		if !sameBoot || !seen || !e.isOf(u) || e.Since.After(now) {
			e.Since = now
		}
		since[path] = e.Since
	}
	return since, nil
}

// Record implements UnusedStagingStore: it replaces the file.
func (s FileStore) Record(bootID string, unused map[string]UnusedStaging, since map[string]time.Time) error {
	next := storeFile{SchemaVersion: reconstruct.SchemaVersion, BootID: bootID, UnusedSince: make(map[string]storeEntry, len(unused))}
	for path, u := range unused {
		next.UnusedSince[path] = storeEntry{UniqueName: u.UniqueName, Since: since[path], Mount: &u.Mount}
	}
	return writeAtomically(s.Path(), next)
}

// isOf says whether e records the mount u, of the same volume.
func (e storeEntry) isOf(u UnusedStaging) bool {
	return e.UniqueName == u.UniqueName && e.Mount != nil && *e.Mount == u.Mount
}

// maxStoreSize bounds the read of the store: an entry is a few hundred
// bytes, one per leaked staging mount. A file that is no store (a symlink
// to /dev/zero, a FIFO, a huge file) fails within its bounds.
const (
	maxStoreSize     = 16 << 20
	storeReadTimeout = 10 * time.Second
)

func (s FileStore) load() (storeFile, error) {
	var f storeFile
	switch b, err := bounded.ReadFile(context.Background(), s.Path(), maxStoreSize, storeReadTimeout); {
	case errors.Is(err, fs.ErrNotExist):
		return f, nil
	case err != nil:
		return f, fmt.Errorf("unused staging store: %w", err)
	default:
		if err := json.Unmarshal(b, &f); err != nil {
			return f, fmt.Errorf("unused staging store %s: %w (remove it to start afresh)", s.Path(), err)
		}
	}
	return f, nil
}

// writeAtomically writes v as JSON over path (atomicfile.Write: synced,
// then renamed, then the dir synced).
func writeAtomically(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("unused staging store: %w", err)
	}
	return nil
}
