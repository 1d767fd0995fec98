//go:build !linux

package mountscan

import (
	"context"
	"fmt"
)

// EventWatch needs Linux (6.15 and later).
type EventWatch struct{}

// WatchEvents needs Linux: it fails with ErrEventsUnavailable.
func WatchEvents(_ context.Context, src Source) (*EventWatch, error) {
	return nil, fmt.Errorf("%w: %s: fanotify is Linux's", ErrEventsUnavailable, src.Name())
}

// Table is never reached.
func (e *EventWatch) Table(context.Context) (*Table, error) { return nil, ErrEventsUnavailable }

// Fd is never reached.
func (e *EventWatch) Fd() int { return -1 }

// Stats is never reached.
func (e *EventWatch) Stats() EventStats { return EventStats{} }

// Resync is never reached.
func (e *EventWatch) Resync() {}

// Close is never reached.
func (e *EventWatch) Close() error { return nil }

// Method is never reached.
func (e *EventWatch) Method() string { return WatchMountinfo }
