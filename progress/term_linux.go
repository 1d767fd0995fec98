package progress

import (
	"os"

	"golang.org/x/sys/unix"
)

// IsTerminal says whether f is a terminal: one that answers a terminal's
// ioctl, which a file, a pipe or /dev/null does not (a character device is
// not enough).
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func width(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 80
	}
	return int(ws.Col)
}
