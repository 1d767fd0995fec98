package reconstruct

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	boundedcall "github.com/volrecon/volrecon/internal/bounded"
)

// probeResult is the outcome of one bounded filesystem call.
type probeResult struct {
	err  error
	hung bool // did not return within the timeout
}

// bounded runs fn in its own goroutine and gives up after timeout. A path
// whose call hung stays hung (and is not touched again) in the HungPaths
// ctx carries: see internal/bounded.
func bounded(ctx context.Context, path string, timeout time.Duration, fn func() error) probeResult {
	_, err := boundedcall.Call(ctx, path, timeout, func() (struct{}, error) { return struct{}{}, fn() })
	switch {
	case errors.Is(err, boundedcall.ErrHung):
		return probeResult{hung: true}
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return probeResult{err: err, hung: true}
	}
	return probeResult{err: err}
}

// probe runs prober on hostPath as a bounded call of timeout. The prober
// gets a context of the scan's (its values, the HungPaths, done when the
// scan's is) with a deadline of timeout from now, cancelled once the probe
// is over or given up: a prober that honours it returns by then, and one
// that returns because that deadline passed is as hung as one that does
// not return.
func probe(ctx context.Context, hostPath string, timeout time.Duration, prober func(context.Context, string) error) probeResult {
	probeCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := bounded(ctx, hostPath, timeout, func() error { return prober(probeCtx, hostPath) })
	if !r.hung && errors.Is(r.err, context.DeadlineExceeded) && errors.Is(probeCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return probeResult{hung: true}
	}
	return r
}

// statProbe is the default prober: a plain stat of the mounted path.
func statProbe(_ context.Context, hostPath string) error {
	_, err := os.Stat(hostPath)
	return err
}

// corruptErrnos are the errors that mean "a mount is there and broken",
// never "the path does not exist".
// ECONNABORTED is what a stat already waiting on a FUSE daemon gets when the
// daemon dies.
var corruptErrnos = []syscall.Errno{syscall.ENOTCONN, syscall.ECONNABORTED, syscall.ESTALE, syscall.EIO, syscall.EHOSTDOWN, syscall.ENODEV}

// isCorrupted says whether a probe's error means a broken mount. It is not
// mount-utils' IsCorruptedMnt (v0.37): that one looks only one
// *os.PathError, *os.LinkError or *os.SyscallError deep, so it misses the
// probe's wrapped errors; it counts EACCES (a stat we may not do is not a
// broken mount) and EWOULDBLOCK as corrupted; and it lacks ECONNABORTED.
func isCorrupted(err error) bool {
	for _, errno := range corruptErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// probeAll runs probe on every path, at most concurrency at a time. A hung
// call frees its slot on timeout, so one hung mount never blocks the rest.
func probeAll(paths []string, concurrency int, probe func(string) probeResult) map[string]probeResult {
	results := make(map[string]probeResult, len(paths))
	seen := make(map[string]bool, len(paths))
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, concurrency)
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			r := probe(p)
			mu.Lock()
			results[p] = r
			mu.Unlock()
			<-slots
		}()
	}
	wg.Wait()
	return results
}
