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

// ReadTable reads the namespace's table, consistently: through its pin, by
// entering the namespace, and where it cannot be entered (no CAP_SYS_ADMIN
// over it, or no CAP_SYS_CHROOT) through the first of its tasks still in
// it, which it returns (the zero Task when read through the pin). A namespace that
// cannot be read, or whose every task left when it could be read only
// through them, is an error wrapping ErrIncomplete, never an empty table:
// something may still run in it. The read is bounded by Options.Timeout.
func (n *Namespace) ReadTable(ctx context.Context, procDir string, opts Options) (*mountscan.Table, Task, error) {
	procDir, err := filepath.Abs(procDir)
	if err != nil {
		return nil, Task{}, fmt.Errorf("%w: %w", ErrIncomplete, err)
	}
	table, from, err := n.read(ctx, procDir, opts, nil, nil)
	if err != nil {
		return nil, from, fmt.Errorf("%w: %s: %w", ErrIncomplete, n, err)
	}
	return table, from, nil
}

// read is ReadTable. binds (with h), when not nil, says which of the nsfs
// binds in the table to pin; the pins are handed to h.
func (n *Namespace) read(ctx context.Context, procDir string, opts Options, binds func(*mountscan.Table) []wantedBind, h *handoff) (*mountscan.Table, Task, error) {
	if binds == nil {
		binds = func(*mountscan.Table) []wantedBind { return nil }
	}
	var notEntered error
	if n.pin != nil {
		table, err := n.readEntered(ctx, opts, binds, h)
		if !errors.Is(err, errCannotEnter) {
			return table, Task{}, err
		}
		notEntered = err
	}
	table, from, err := n.readThroughTasks(ctx, procDir, opts, binds, h)
	if err != nil && notEntered != nil {
		err = fmt.Errorf("%w; and through its tasks: %w", notEntered, err)
	}
	return table, from, err
}

// readEntered reads the table by entering the namespace (enterAndRead),
// on a thread of its own, within the timeout. The key of a hung read, for
// the Registry, is the namespace's: a namespace whose read hung is not
// entered again by this process.
func (n *Namespace) readEntered(ctx context.Context, opts Options, binds func(*mountscan.Table) []wantedBind, h *handoff) (*mountscan.Table, error) {
	f := n.pin
	if h == nil {
		h = &handoff{}
	}
	return bounded.Call(ctx, "/"+n.ID, opts.timeout(), func() (*mountscan.Table, error) {
		fd, err := dupPin(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errCannotEnter, err)
		}
		return enterAndRead(ctx, fd, binds, h)
	})
}

// errNoTask: the namespace could only be read through its tasks, and none
// is left in it.
var errNoTask = errors.New("no task of it is left to read its table through")

// readThroughTasks reads the table through the first of the namespace's
// tasks still in it.
func (n *Namespace) readThroughTasks(ctx context.Context, procDir string, opts Options, binds func(*mountscan.Table) []wantedBind, h *handoff) (*mountscan.Table, Task, error) {
	for _, t := range n.Tasks {
		path := filepath.Join(t.dir(procDir), "mountinfo")
		table, err := bounded.Call(ctx, path, opts.timeout(), func() (*mountscan.Table, error) {
			return n.readThrough(ctx, procDir, t, binds, h)
		})
		switch {
		case errors.Is(err, errLeft):
			continue
		case err != nil:
			return nil, t, err
		}
		return table, t, nil
	}
	return nil, Task{}, errNoTask
}

// readThrough reads the table of the namespace through the task t. The
// task's link must name the namespace before and after: a TID reused by a
// task of another namespace, or a task that moved, is not read from. The
// binds wanted are opened through the task's root, while it is checked to
// be in the namespace.
func (n *Namespace) readThrough(ctx context.Context, procDir string, t Task, binds func(*mountscan.Table) []wantedBind, h *handoff) (*mountscan.Table, error) {
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
	for _, b := range binds(table) {
		p, err := openPin(filepath.Join(t.dir(procDir), "root", b.Path))
		err = refused(err, ptraceRefusal)
		if err == nil && p.ino != b.ino {
			p.close()
			err = fmt.Errorf("%s: %w: it is mnt:[%d] now", b.Path, errNotNamespace, p.ino)
		}
		h.add(b, p, err)
	}
	if err := still(); err != nil {
		return nil, err
	}
	return table, nil
}
