package mountnamespaces

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/mountscan"
)

// errLeft: the task is no longer in the namespace (it exited, or moved to
// another): the next task of the namespace is tried.
var errLeft = errors.New("left the namespace")

// ReadTable reads the namespace's table, once, through the first of its
// tasks still in it, and returns it and that task. All of them gone, the
// namespace is empty, nothing runs in it: ReadTable returns a nil table
// and no error. The read is bounded by Options.Timeout.
func (n *Namespace) ReadTable(ctx context.Context, procDir string, opts Options) (*mountscan.Table, Task, error) {
	procDir, err := filepath.Abs(procDir)
	if err != nil {
		return nil, Task{}, err
	}
	for _, t := range n.Tasks {
		path := filepath.Join(t.dir(procDir), "mountinfo")
		table, err := bounded.Call(ctx, path, opts.timeout(), func() (*mountscan.Table, error) {
			return n.readThrough(ctx, procDir, t)
		})
		switch {
		case errors.Is(err, errLeft):
			continue
		case err != nil:
			return nil, t, fmt.Errorf("%s: %w", n, err)
		}
		return table, t, nil
	}
	return nil, Task{}, nil
}

// readThrough reads the table of the namespace through the task t. The
// task's link must name the namespace before and after: a TID reused by a
// task of another namespace, or a task that moved, is not read from.
func (n *Namespace) readThrough(ctx context.Context, procDir string, t Task) (*mountscan.Table, error) {
	still := func() error {
		if !n.identified {
			return nil
		}
		id, err := os.Readlink(filepath.Join(t.dir(procDir), "ns", "mnt"))
		switch {
		case gone(err):
			return errLeft
		case err != nil:
			return err
		case id != n.ID:
			return errLeft
		}
		return nil
	}
	if err := still(); err != nil {
		return nil, err
	}
	table, err := mountscan.ReadFile(ctx, filepath.Join(t.dir(procDir), "mountinfo"), 0)
	if err != nil {
		// A task that exits drops its namespace first: its mountinfo then
		// fails with EINVAL, and its link with ENOENT.
		if gone(err) || errors.Is(err, syscall.EINVAL) {
			if exited, _ := exitedTask(t.dir(procDir)); exited {
				return nil, errLeft
			}
		}
		return nil, err
	}
	if err := still(); err != nil {
		return nil, err
	}
	return table, nil
}
