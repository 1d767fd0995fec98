// Package mountnamespaces reads the mount table of every distinct mount
// namespace on the node, once each: the evidence that something outside
// the host's own table (a container) still uses a mount. Both the evidence
// of life (package liveness) and the evidence of death of the CSI teardown
// (cmd) rest on it.
//
// A process that exits meanwhile is skipped, and a namespace is read
// through the next of its processes; one whose namespace id cannot be read
// (ptrace access denied) is read as a namespace of its own. Every read is
// bounded in size and time. A namespace that cannot be read is an error: a
// caller must then not take "no user" for granted.
package mountnamespaces

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/volrecon/volrecon/internal/boundedread"
	"github.com/volrecon/volrecon/mountscan"
)

// Defaults of Options.
const (
	DefaultTimeout = 10 * time.Second
	DefaultMaxSize = 64 << 20
	maxNamespaces  = 4096
)

// Options bound the reads.
type Options struct {
	Timeout time.Duration // per mountinfo read (0 = DefaultTimeout)
	MaxSize int64         // per mountinfo read (0 = DefaultMaxSize)
}

// Group is one mount namespace and the processes in it.
type Group struct {
	// ID is the namespace's link text, e.g. "mnt:[4026531841]", or a
	// description of the process whose namespace id could not be read.
	ID   string
	PIDs []string
}

// Namespace is one mount namespace and its table.
type Namespace struct {
	ID string
	// PID is the process whose mountinfo was read.
	PID   int
	Table *mountscan.Table
}

// List lists the distinct mount namespaces of the processes in procDir
// (the host's /proc, with hostPID in a container).
func List(ctx context.Context, procDir string) ([]Group, error) {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil, fmt.Errorf("mount namespaces: %w", err)
	}
	var out []Group
	index := map[string]int{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("listing the processes in %s: %w", procDir, err)
		}
		id, err := os.Readlink(filepath.Join(procDir, e.Name(), "ns", "mnt"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // exited
		case err != nil:
			// Which namespace it is needs ptrace access; its mountinfo is
			// world-readable, so it is read as a namespace of its own.
			id = "of pid " + e.Name() + " (id unreadable: " + err.Error() + ")"
		default:
			if i, seen := index[id]; seen {
				out[i].PIDs = append(out[i].PIDs, e.Name())
				continue
			}
			index[id] = len(out)
		}
		if len(out) == maxNamespaces {
			return nil, fmt.Errorf("mount namespaces: more than %d", maxNamespaces)
		}
		out = append(out, Group{ID: id, PIDs: []string{e.Name()}})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no process found in %s: is it the host's /proc?", procDir)
	}
	return out, nil
}

// Read reads the table of the namespace through the first of its processes
// that is still there. All of them gone: the namespace is empty, nothing
// runs in it, and Read returns nil and pid "".
func (g Group) Read(ctx context.Context, procDir string, opts Options) (table *mountscan.Table, pid string, err error) {
	for _, pid := range g.PIDs {
		path := filepath.Join(procDir, pid, "mountinfo")
		data, err := boundedread.ReadFile(ctx, path, orDefault(opts.MaxSize, DefaultMaxSize), orDefault(opts.Timeout, DefaultTimeout))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue
		}
		if err != nil {
			return nil, pid, fmt.Errorf("mount namespace %s of pid %s: %w", g.ID, pid, err)
		}
		table, err := mountscan.ParseBytes(data)
		if err != nil {
			return nil, pid, fmt.Errorf("mount namespace %s of pid %s: %s: %w", g.ID, pid, path, err)
		}
		return table, pid, nil
	}
	return nil, "", nil
}

// Read reads the table of each distinct mount namespace; a namespace that
// cannot be read is an error.
func Read(ctx context.Context, procDir string, opts Options) ([]Namespace, error) {
	groups, err := List(ctx, procDir)
	if err != nil {
		return nil, err
	}
	var out []Namespace
	for _, g := range groups {
		table, pid, err := g.Read(ctx, procDir, opts)
		if err != nil {
			return nil, err
		}
		if table == nil {
			continue // every process of it exited
		}
		n, _ := strconv.Atoi(pid)
		out = append(out, Namespace{ID: g.ID, PID: n, Table: table})
	}
	return out, nil
}

// orDefault returns v, or def when v is not positive.
func orDefault[T int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
