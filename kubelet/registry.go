package kubelet

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/volrecon/volrecon/internal/bounded"
)

// MaxRegistryEntries bounds the listing of each dir of plugins_registry/:
// a node has a registration socket per driver and plugin, a few dozen at most.
const MaxRegistryEntries = 4096

// RegistryWalk says how WalkRegistry reads plugins_registry/.
type RegistryWalk struct {
	// Timeout bounds each listing (0 = bounded.DefaultTimeout).
	Timeout time.Duration
	// MaxDepth is how deep it goes below the dir: 0 lists the dir alone.
	MaxDepth int
	// Fence names the mount points nothing is listed at or below (nil = none).
	Fence *bounded.Fence
}

// WalkRegistry lists the dir dir (a path as this process reads it, e.g.
// Host.Path of Root.RegistryDir), calling visit with each entry and its
// path, and goes into its subdirs whose name does not start with a dot,
// as the kubelet's plugin watcher does, to w.MaxDepth, never following a
// symlink. Each listing is bounded in time (bounded.ReadDir) and in
// entries (MaxRegistryEntries).
//
// The error of dir itself is returned as it is (its absence too), as is a
// listing of any dir that hung, passed its limit or lies behind the fence,
// and ctx's error: then what lies under dir cannot be told. A subdir gone
// or unreadable is skipped, as the plugin watcher skips it.
func WalkRegistry(ctx context.Context, dir string, w RegistryWalk, visit func(path string, d fs.DirEntry)) error {
	return w.walk(ctx, dir, 0, visit)
}

func (w RegistryWalk) walk(ctx context.Context, dir string, depth int, visit func(string, fs.DirEntry)) error {
	if err := w.Fence.Check(dir); err != nil {
		return err
	}
	entries, err := bounded.ReadDir(ctx, dir, w.Timeout, bounded.Limits{Entries: MaxRegistryEntries})
	if err != nil {
		return w.listError(ctx, depth, err)
	}
	for _, d := range entries {
		p := filepath.Join(dir, d.Name())
		visit(p, d)
		if !d.IsDir() || depth >= w.MaxDepth || strings.HasPrefix(d.Name(), ".") {
			continue
		}
		if err := w.walk(ctx, p, depth+1, visit); err != nil {
			return err
		}
	}
	return nil
}

// listError is what a failed listing at depth means for the walk: the
// top dir's error, one that leaves the registry unknown, or none (skipped).
func (w RegistryWalk) listError(ctx context.Context, depth int, err error) error {
	switch {
	case depth == 0, errors.Is(err, bounded.ErrHung), errors.Is(err, bounded.ErrLimit):
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return nil
}
