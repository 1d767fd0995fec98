package kube

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	clocktesting "k8s.io/utils/clock/testing"
)

// The staleness rule, step by step on a fake clock.
func TestHealthTrustsOnlyASyncedRecentWatchWithoutLaterFailures(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC))
	h := &health{clock: clk, staleAfter: 3 * time.Minute}
	steps := []struct {
		name    string
		do      func()
		trusted bool
		reason  string
	}{
		{"nothing yet", func() {}, false, "not synced"},
		{"listed but not synced", h.contact, false, "not synced"},
		{"synced", h.setSynced, true, ""},
		{"quiet, within the bound", func() { clk.Step(3 * time.Minute) }, true, ""},
		{"quiet, past the bound", func() { clk.Step(time.Second) }, false, "no word from the API server for 3m1s"},
		{"a bookmark arrives", h.contact, true, ""},
		{"the watch fails", func() { clk.Step(time.Second); h.fail(errors.New("connection refused")) }, false, "connection refused"},
		{"the relist succeeds", func() { clk.Step(time.Second); h.contact() }, true, ""},
		{"the probe is refused", func() { h.probed(errors.New("pods is forbidden")) }, false, "did not answer the probe: pods is forbidden"},
		{"the probe succeeds again", func() { h.probed(nil) }, true, ""},
		{"a probe does not renew the watch", func() { clk.Step(4 * time.Minute); h.probed(nil) }, false, "no word from the API server"},
	}
	for _, s := range steps {
		s.do()
		st := h.status()
		assert.Equal(t, s.trusted, st.Trusted, s.name)
		if s.reason != "" {
			assert.Contains(t, st.Reason, s.reason, s.name)
		} else {
			assert.Empty(t, st.Reason, s.name)
		}
	}
}
