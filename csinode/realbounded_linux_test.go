package csinode

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/csinode/fakedriver"
	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// locateWithin runs Locate in a goroutine and fails the test if it has not
// returned within limit: a hang guard, not a measure of speed.
func locateWithin(t *testing.T, limit time.Duration, opts LocateOptions) (Endpoint, error) {
	t.Helper()
	type result struct {
		ep  Endpoint
		err error
	}
	done := make(chan result, 1)
	go func() { ep, err := Locate(context.Background(), driver, opts); done <- result{ep, err} }()
	select {
	case r := <-done:
		return r.ep, r.err
	case <-time.After(limit):
		t.Fatalf("Locate hung: no result within %s", limit)
		return Endpoint{}, nil
	}
}

// TestRealLocateSendsNothingIntoAFUSEMount: plugins_registry/, or the dir
// of the default socket, is a FUSE mount whose daemon reads requests and
// never answers, and Locate is told to keep out of it (NotEntered, as
// cleanup passes from its mount table): where the driver listens cannot
// be told, so it is unreachable (ErrNoEndpoint), though a driver answers at
// the default socket, and the mount gets no request. It used to list and
// dial there, which blocked for good.
func TestRealLocateSendsNothingIntoAFUSEMount(t *testing.T) {
	for _, dir := range []string{root + "/plugins_registry", root + "/plugins/" + driver} {
		t.Run(dir, func(t *testing.T) {
			if !mountns.Enter(t) {
				return
			}
			n := newNode(t)
			if dir != root+"/plugins/"+driver {
				n.serveDriver(t, &fakedriver.Driver{Name: driver}, root+"/plugins/"+driver+"/csi.sock")
			}
			srv := mountns.ServeFUSEWith(t, n.at(dir), mountns.FUSEOptions{Tree: []string{"csi.sock", driver + "-reg.sock"}})
			srv.Stop()
			n.opts.NotEntered = map[string]string{dir: mountns.FUSEFSType}
			_, err := locateWithin(t, 10*time.Second, n.opts)
			require.ErrorIs(t, err, ErrNoEndpoint)
			assert.ErrorIs(t, err, bounded.ErrNotEntered)
			assert.Contains(t, err.Error(), "where it listens cannot be told")
			assert.Equal(t, mountns.FUSEStats{Requests: map[string]int{}}, srv.Stats(), "nothing is sent")
		})
	}
}

// TestRealLocateIsBounded: plugins_registry/ is a FUSE mount that never
// answers and Locate does not know it (a mount made after the table was
// read): its listing is abandoned at the deadline, and the driver is
// unreachable. A connect through such a mount is abandoned the same way.
func TestRealLocateIsBounded(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newNode(t)
	n.serveDriver(t, &fakedriver.Driver{Name: driver}, root+"/plugins/"+driver+"/csi.sock")
	mountns.ServeFUSE(t, n.at(root+"/plugins_registry")).Stop()
	n.opts.FSTimeout = 200 * time.Millisecond
	_, err := locateWithin(t, 10*time.Second, n.opts)
	require.ErrorIs(t, err, ErrNoEndpoint)
	assert.ErrorIs(t, err, bounded.ErrHung)

	done := make(chan error, 1)
	go func() {
		_, err := dialWithin(context.Background(), n.at(root+"/plugins_registry/x/csi.sock"), 200*time.Millisecond)
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, bounded.ErrHung)
	case <-time.After(10 * time.Second):
		t.Fatal("the connect hung")
	}
}
