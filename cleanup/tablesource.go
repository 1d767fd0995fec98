package cleanup

import (
	"context"

	"github.com/volrecon/volrecon/mountscan"
)

// tableSource gives Execute the mount table before each action. Where the
// kernel can say that the table changed (mountscan.Watch: a mountinfo file
// of /proc, flagged after any mount, unmount, move or remount in its
// namespace), it re-reads the table only then; elsewhere (a regular file,
// Node.ReadMountTable) it reads it every time.
type tableSource struct {
	node  Node
	watch *mountscan.Watcher // nil: read every time
	table *mountscan.Table   // the last table read, while watch says it is current
}

// newTableSource starts watching before the first read, so that no change
// made after that read goes unseen.
func newTableSource(n Node) *tableSource {
	s := &tableSource{node: n}
	if n.ReadMountTable == nil {
		path := n.MountInfoPath
		if path == "" {
			path = mountscan.DefaultPath
		}
		if w, err := mountscan.Watch(path); err == nil {
			s.watch = w
		}
	}
	return s
}

// current returns a table that has every change made before the call: the
// last one read if the watch saw no change since that read began, else a
// fresh one. A poll that fails counts as a change.
func (s *tableSource) current(ctx context.Context) (*mountscan.Table, error) {
	if s.watch == nil {
		return s.node.ReadTable(ctx)
	}
	if s.table != nil {
		if changed, err := s.watch.Changed(); err == nil && !changed {
			return s.table, nil
		}
	}
	return s.fresh(ctx)
}

// fresh reads the table whatever the watch says: after Execute's own
// change, which a fake unmount (ExecOptions.Unmount) makes without the
// kernel knowing.
func (s *tableSource) fresh(ctx context.Context) (*mountscan.Table, error) {
	if s.watch == nil {
		return s.node.ReadTable(ctx)
	}
	s.table = nil // let it go before the next read
	table, err := s.watch.Read(ctx, s.node.MaxReadAttempts)
	if err != nil {
		return nil, err
	}
	s.table = table
	return table, nil
}

func (s *tableSource) close() {
	if s.watch != nil {
		_ = s.watch.Close()
	}
}
