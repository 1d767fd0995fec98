package cleanup

import (
	"context"

	"github.com/volrecon/volrecon/mountscan"
)

// tableSource gives Execute the mount table before each action, read
// afresh every time.
type tableSource struct{ node Node }

func newTableSource(n Node) *tableSource { return &tableSource{node: n} }

func (s *tableSource) current(ctx context.Context) (*mountscan.Table, error) {
	return s.node.readTable(ctx)
}

func (s *tableSource) close() {}
