package ptytest

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Terminal is a pseudo-terminal: Tty is the terminal a program writes to,
// and everything written there can be read with Output.
type Terminal struct {
	Tty *os.File

	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	done   chan struct{}
}

// Open opens a pseudo-terminal pair from /dev/ptmx, or skips the test when
// the system has none; both ends are closed when the test ends.
func Open(t *testing.T) *Terminal {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		master.Close()
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Fatalf("open the pseudo-terminal: %v", err)
	}
	term := &Terminal{Tty: tty, master: master, done: make(chan struct{})}
	go term.read()
	t.Cleanup(func() {
		tty.Close()
		<-term.done // the master reads EIO once the last tty is closed
		master.Close()
	})
	return term
}

func (term *Terminal) read() {
	defer close(term.done)
	buf := make([]byte, 4096)
	for {
		n, err := term.master.Read(buf)
		term.mu.Lock()
		term.out.Write(buf[:n])
		term.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Output returns what was written to the terminal so far (the terminal
// turns "\n" into "\r\n").
func (term *Terminal) Output() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}
