//go:build !linux

package nodewatch

import (
	"context"
	"errors"
	"time"
)

// ErrUnsupported: change detection needs Linux (inotify, a /proc mount table).
var ErrUnsupported = errors.New("nodewatch: change detection needs Linux")

// Watcher is not available on this platform.
type Watcher struct{}

// New returns ErrUnsupported.
func New(context.Context, Options) (*Watcher, error) { return nil, ErrUnsupported }

func (*Watcher) Notify()                                  {}
func (*Watcher) Wait(context.Context, time.Duration) bool { return false }
func (*Watcher) Take(context.Context) Changes             { return Changes{All: true} }
func (*Watcher) WatchData(context.Context, []string)      {}
func (*Watcher) Status() Status                           { return Status{} }
func (*Watcher) Close() error                             { return nil }
