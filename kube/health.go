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
	lastErr     string
	probeErr    string // of the last probe, "" when it succeeded
}

func (h *health) contact() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastContact = h.clock.Now()
}

func (h *health) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastFailure, h.lastErr = h.clock.Now(), err.Error()
}

func (h *health) probed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probeErr = ""
	if err != nil {
		h.probeErr = err.Error()
	}
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
}

func (h *health) status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Status{Synced: h.synced, LastContact: h.lastContact, LastError: h.lastErr}
	if h.probeErr != "" {
		s.LastError = h.probeErr
	}
	age := h.clock.Since(h.lastContact)
	switch {
	case !h.synced:
		s.Reason = "the pod watch has not synced yet"
	case h.probeErr != "":
		s.Reason = "the API server did not answer the probe: " + h.probeErr
	case !h.lastFailure.IsZero() && !h.lastFailure.Before(h.lastContact):
		s.Reason = "the last request to the API server failed: " + h.lastErr
	case age > h.staleAfter:
		s.Reason = "no word from the API server for " + age.Round(time.Second).String() +
			" (trusted for " + h.staleAfter.String() + ")"
	default:
		s.Trusted = true
	}
	return s
}
