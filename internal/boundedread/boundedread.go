package boundedread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// ErrTooLarge: the file holds more than the size bound.
var ErrTooLarge = errors.New("larger than the size limit")

// ErrTimeout: the file did not answer within the time bound.
var ErrTimeout = errors.New("did not answer in time")

// ReadFile reads the file at path, at most maxSize bytes, within timeout
// (and ctx). It opens the file in the same bounded goroutine, since opening
// a FIFO blocks until a writer comes.
func ReadFile(ctx context.Context, path string, maxSize int64, timeout time.Duration) ([]byte, error) {
	return bounded(ctx, path, timeout, func() ([]byte, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return readLimited(path, f, maxSize)
	})
}

// Read reads r (say, stdin) like ReadFile, named name in errors.
func Read(ctx context.Context, name string, r io.Reader, maxSize int64, timeout time.Duration) ([]byte, error) {
	return bounded(ctx, name, timeout, func() ([]byte, error) { return readLimited(name, r, maxSize) })
}

func readLimited(name string, r io.Reader, maxSize int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxSize+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > maxSize {
		return nil, fmt.Errorf("%s: %w of %d bytes (is it a device such as /dev/zero?)", name, ErrTooLarge, maxSize)
	}
	return data, nil
}

type result struct {
	data []byte
	err  error
}

func bounded(ctx context.Context, name string, timeout time.Duration, read func() ([]byte, error)) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan result, 1) // buffered: an abandoned read never blocks on sending
	go func() {
		data, err := read()
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: %w (%s; a FIFO without a writer?)", name, ErrTimeout, timeout)
		}
		return nil, fmt.Errorf("%s: %w", name, ctx.Err())
	}
}
