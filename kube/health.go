package kube

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// health tracks whether the answers of a watch can be trusted: only while
// its cache has synced, its last contact with the API server (through the
// list and watch themselves) is recent, no list or watch failure came after
// that contact, and the last probe succeeded.
type health struct {
	clock      clock.PassiveClock
	staleAfter time.Duration

	mu          sync.Mutex
	synced      bool
	lastContact time.Time // a list, a watch start, or any watch event (bookmarks too)
	lastFailure time.Time
	lastErr     error
	probeErr    error // of the last probe, nil when it succeeded
}

func (h *health) contact() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastContact = h.clock.Now()
}

func (h *health) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastFailure, h.lastErr = h.clock.Now(), err
}

func (h *health) probed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probeErr = err
}

func (h *health) setSynced() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.synced = true
}

// Status says whether a Watcher's answers are trusted, and why not.
type Status struct {
	Trusted     bool      `json:"trusted"`
	Reason      string    `json:"reason,omitempty"` // why not trusted
	Synced      bool      `json:"synced"`
	LastContact time.Time `json:"lastContact,omitzero"`
	LastError   string    `json:"lastError,omitempty"`
	cause       error     // the error behind Reason, if one is
}

func (h *health) status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Status{Synced: h.synced, LastContact: h.lastContact}
	lastErr := h.lastErr
	if h.probeErr != nil {
		lastErr = h.probeErr
	}
	if lastErr != nil {
		s.LastError = lastErr.Error()
	}
	age := h.clock.Since(h.lastContact)
	switch {
	case !h.synced && h.lastErr != nil:
		s.Reason, s.cause = "the pod watch has not synced yet: the last request to the API server failed: "+h.lastErr.Error(), h.lastErr
	case !h.synced:
		s.Reason = "the pod watch has not synced yet"
	case h.probeErr != nil:
		s.Reason, s.cause = "the API server did not answer the probe: "+h.probeErr.Error(), h.probeErr
	case !h.lastFailure.IsZero() && !h.lastFailure.Before(h.lastContact):
		s.Reason, s.cause = "the last request to the API server failed: "+h.lastErr.Error(), h.lastErr
	case age > h.staleAfter:
		s.Reason = "no word from the API server for " + age.Round(time.Second).String() +
			" (trusted for " + h.staleAfter.String() + ")"
	default:
		s.Trusted = true
	}
	return s
}

// UntrustedError is the error of a Watcher's answer while its cache is not
// trusted (errors.Is ErrUntrusted): Reason says why, and it wraps the
// API server's error behind it, if one is.
type UntrustedError struct {
	Reason string
	Err    error
}

func (e *UntrustedError) Error() string { return ErrUntrusted.Error() + ": " + e.Reason }

func (e *UntrustedError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrUntrusted}
	}
	return []error{ErrUntrusted, e.Err}
}
