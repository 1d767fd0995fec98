// Reading a file, or a stream, with a bound on its size and on the time it
// may take: /dev/zero must not fill memory and a FIFO without a writer must
// not block forever. Errors name the path and which bound was hit
// (ErrTooLarge, ErrTimeout). It is for input files given by a user
// (--active-pods) and for /proc files of other processes. A read that timed
// out is abandoned, not interrupted, as every call of this package is.

package bounded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// ErrTooLarge: the file holds more than the size bound (ReadFile, Read).
var ErrTooLarge = errors.New("larger than the size limit")

// ErrTimeout: the file did not answer within the time bound (ReadFile, Read).
var ErrTimeout = errors.New("did not answer in time")

// stdinName is what Read's stream is called in the registry of hung paths
// of hung paths, which wants an absolute path.
const stdinName = "/dev/stdin"

// ReadFile reads the file at path, at most maxSize bytes, within timeout
// (and ctx). It opens the file in the same bounded goroutine, since opening
// a FIFO blocks until a writer comes.
func ReadFile(ctx context.Context, path string, maxSize int64, timeout time.Duration) ([]byte, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return boundedRead(ctx, abs, timeout, func() ([]byte, error) {
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
	data, err := boundedRead(ctx, stdinName, timeout, func() ([]byte, error) { return readLimited(name, r, maxSize) })
	if err != nil && errors.Is(err, ErrTimeout) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return data, err
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

// boundedRead runs read as Call does: in a goroutine of its own with a
// deadline, abandoned (and its path held as hung) if it misses it.
func boundedRead(ctx context.Context, name string, timeout time.Duration, read func() ([]byte, error)) ([]byte, error) {
	data, err := Call(ctx, name, timeout, read)
	if errors.Is(err, ErrHung) {
		return nil, fmt.Errorf("%w (a FIFO without a writer?): %w", ErrTimeout, err)
	}
	return data, err
}
