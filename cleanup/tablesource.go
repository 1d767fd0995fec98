package cleanup

import (
	"context"

	"github.com/volrecon/volrecon/mountscan"
)

// tableSource gives Execute the mount table before each action. Where the
// kernel can say that the table changed — a mountinfo file of /proc, whose
// poll reports POLLPRI after any mount, unmount, move or remount in its
// namespace since the last poll — it re-reads the table only then;
// elsewhere (a regular file, Node.ReadMountTable) it reads it every time.
type tableSource struct {
	node  Node
	watch *mountWatch      // nil: read every time
	table *mountscan.Table // the last table read, while watch says it is current
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
		s.watch = watchMountTable(path)
	}
	return s
}

// current returns a table that has every change made before the call. The
// poll comes before the read: a change made during the read fires the next
// poll.
func (s *tableSource) current(ctx context.Context) (*mountscan.Table, error) {
	if s.table != nil && !s.watch.changed() {
		return s.table, nil
	}
	s.table = nil
	table, err := s.node.readTable(ctx)
	if err != nil {
		return nil, err
	}
	if s.watch != nil {
		s.table = table
	}
	return table, nil
}

// fresh reads the table whatever the watch says: after Execute's own
// change, which a fake unmount (ExecOptions.Unmount) makes without the
// kernel knowing. The poll first, to forget the change it reads.
func (s *tableSource) fresh(ctx context.Context) (*mountscan.Table, error) {
	s.watch.changed()
	s.table = nil
	return s.current(ctx)
}

func (s *tableSource) close() { s.watch.close() }
