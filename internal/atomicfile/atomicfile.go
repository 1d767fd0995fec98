package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// syncFile is (*os.File).Sync; tests record what is synced.
var syncFile = (*os.File).Sync

// Write replaces path with data, with permissions perm. On an error path
// is as it was and no temp file is left.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFrom(path, bytes.NewReader(data), perm)
}

// WriteFrom is Write of what r gives, to its end (a binary copied whole).
func WriteFrom(path string, r io.Reader, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	err = writeSynced(tmp, r, perm)
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name()) // not renamed: still ours
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("replace %s: the file is replaced, but not yet durably: %w", path, err)
	}
	return nil
}

// writeSynced writes what r gives to f, sets its permissions (CreateTemp
// makes it 0600; a reader may run as another user), syncs and closes it.
func writeSynced(f *os.File, r io.Reader, perm os.FileMode) error {
	_, err := io.Copy(f, r)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = syncFile(f)
	}
	return errors.Join(err, f.Close())
}

// syncDir makes the entries of dir durable (a rename in it).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(syncFile(d), d.Close())
}
