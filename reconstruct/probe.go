package reconstruct

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"
)

// probeResult is the outcome of one bounded filesystem call.
type probeResult struct {
	err  error
	hung bool // did not return within the timeout
}

// inflight remembers calls that hung and have not returned yet. A call
// blocked in a hung NFS or FUSE mount holds an OS thread until the kernel
// lets go; a later scan must not start another one on the same path, so it
// reports the path as hung straight away. It is process-wide because the
// blocked threads are.
var inflight = struct {
	sync.Mutex
	paths map[string]bool
}{paths: map[string]bool{}}

// bounded runs fn in its own goroutine and gives up after timeout.
func bounded(ctx context.Context, key string, timeout time.Duration, fn func() error) probeResult {
	inflight.Lock()
	if inflight.paths[key] {
		inflight.Unlock()
		return probeResult{hung: true}
	}
	inflight.paths[key] = true
	inflight.Unlock()

	done := make(chan error, 1)
	go func() {
		err := fn()
		inflight.Lock()
		delete(inflight.paths, key)
		inflight.Unlock()
		done <- err
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return probeResult{err: err}
	case <-timer.C:
		return probeResult{hung: true}
	case <-ctx.Done():
		return probeResult{err: ctx.Err(), hung: true}
	}
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

// isCorrupted unwraps with errors.Is, unlike mount-utils' IsCorruptedMnt,
// which misses wrapped errors.
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
