// Package boundedread reads a file, or a stream, with a bound on its size
// and on the time it may take: /dev/zero must not fill memory and a FIFO
// without a writer must not block forever. Errors name the path and which
// bound was hit (ErrTooLarge, ErrTimeout).
//
// It is for input files given by a user (--active-pods) and for /proc files
// of other processes. The time bound is internal/bounded's: a read that
// timed out is abandoned, not interrupted, so its goroutine stays blocked
// until the file answers (a FIFO: until a writer comes or the process
// exits), and the path counts as hung meanwhile.
package boundedread
