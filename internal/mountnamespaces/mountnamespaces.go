// Package mountnamespaces reads the mount table of every distinct mount
// namespace on the node, once each: the evidence that something outside
// the host's own table (a container) still uses a mount. A process that
// exits meanwhile is skipped; a namespace that cannot be read is an error,
// since a caller must then not take "no user" for granted.
package mountnamespaces

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/volrecon/volrecon/mountscan"
)

// maxNamespaces bounds how many namespaces are read.
const maxNamespaces = 4096

// Namespace is one mount namespace and its table.
type Namespace struct {
	// ID is the namespace's link text, e.g. "mnt:[4026531841]".
	ID string
	// PID is the process whose mountinfo was read.
	PID   int
	Table *mountscan.Table
}

// Read reads the mount table of each distinct mount namespace of the
// processes listed in procDir (the host's /proc, with hostPID in a
// container).
func Read(ctx context.Context, procDir string) ([]Namespace, error) {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil, fmt.Errorf("mount namespaces: %w", err)
	}
	seen := map[string]bool{}
	var out []Namespace
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("mount namespaces: %w", err)
		}
		ns, err := readOne(ctx, procDir, pid, seen)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // the process exited
		case err != nil:
			return nil, fmt.Errorf("mount namespace of pid %d: %w", pid, err)
		case ns == nil:
			continue
		case len(out) == maxNamespaces:
			return nil, fmt.Errorf("mount namespaces: more than %d", maxNamespaces)
		}
		out = append(out, *ns)
	}
	return out, nil
}

// readOne reads the table of pid's namespace unless it was seen already.
func readOne(ctx context.Context, procDir string, pid int, seen map[string]bool) (*Namespace, error) {
	dir := filepath.Join(procDir, strconv.Itoa(pid))
	id, err := os.Readlink(filepath.Join(dir, "ns", "mnt"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, err
	case err != nil:
		// Which namespace it is needs ptrace access, which may be denied
		// (a process of another user namespace); its mountinfo is
		// world-readable, so it is read as a namespace of its own.
		id = "of pid " + strconv.Itoa(pid) + " (id unreadable: " + err.Error() + ")"
	case seen[id]:
		return nil, nil
	}
	table, err := mountscan.ReadFile(ctx, filepath.Join(dir, "mountinfo"), 0)
	if err != nil {
		return nil, err
	}
	seen[id] = true
	return &Namespace{ID: id, PID: pid, Table: table}, nil
}
