//go:build linux

package mountns

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A minimal FUSE server for tests: an empty, read-only root directory,
// served by a child process (this test binary run again) so that a test can
// SIGKILL it, like a FUSE daemon that crashes, or tell it to stop
// answering, like one that hangs. The wire format is the kernel's FUSE ABI
// (<linux/fuse.h>), protocol 7.x, little-endian.

// fuseServerEnv, set in the environment of this binary, makes it serve the
// FUSE connection on fd 3 instead of running tests (see init below).
const fuseServerEnv = "VOLRECON_TEST_FUSE_SERVER"

// FUSEFSType is the filesystem type of a ServeFUSE mount in the mount table.
const FUSEFSType = "fuse.volrecon-served"

// fuseOpTimeout bounds every wait of the parent for the server.
const fuseOpTimeout = 10 * time.Second

func init() {
	if os.Getenv(fuseServerEnv) == "1" {
		os.Exit(fuseServerMain())
	}
}

// FUSEServer is a FUSE filesystem mounted by ServeFUSE and served by a
// child process.
type FUSEServer struct {
	t      *testing.T
	target string
	cmd    *exec.Cmd
	ctrl   *os.File      // the server's stdin: commands
	acks   chan string   // lines the server printed on stdout
	exited chan struct{} // closed once the server has exited and been reaped
	stderr *bytes.Buffer // read only after exited is closed
	killed atomic.Bool
}

// ServeFUSE mounts an empty FUSE filesystem at target, serves it from a
// child process, and returns once the server has answered the kernel's
// FUSE_INIT. At the end of the test the mount is detached and the server
// killed, in that order, so that nothing stays blocked in the connection.
func ServeFUSE(t *testing.T, target string) *FUSEServer {
	t.Helper()
	if err := os.MkdirAll(target, 0o750); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/fuse: %v", err)
	}
	dev := os.NewFile(uintptr(fd), "/dev/fuse")
	defer dev.Close() // the server holds the connection from now on
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=%d,group_id=%d", fd, os.Getuid(), os.Getgid())
	if err := unix.Mount("volrecon-served", target, FUSEFSType, unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		t.Fatalf("mount fuse on %s: %v", target, err)
	}

	exe, err := os.Executable()
	if err != nil {
		_ = unix.Unmount(target, unix.MNT_DETACH)
		t.Fatal(err)
	}
	ctrlR, ctrlW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ackR, ackW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &FUSEServer{t: t, target: target, ctrl: ctrlW, acks: make(chan string, 16),
		exited: make(chan struct{}), stderr: &bytes.Buffer{}}
	s.cmd = exec.Command(exe)
	s.cmd.Env = append(os.Environ(), fuseServerEnv+"=1")
	s.cmd.ExtraFiles = []*os.File{dev} // fd 3
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = ctrlR, ackW, s.stderr
	// The server dies with the test process even if no cleanup runs.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	startErr := s.cmd.Start()
	ctrlR.Close()
	ackW.Close()
	if startErr != nil {
		ackR.Close()
		ctrlW.Close()
		_ = unix.Unmount(target, unix.MNT_DETACH)
		t.Fatalf("start the FUSE server: %v", startErr)
	}
	go func() {
		defer ackR.Close()
		sc := bufio.NewScanner(ackR)
		for sc.Scan() {
			s.acks <- sc.Text()
		}
		close(s.acks)
	}()
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = unix.Unmount(target, unix.MNT_DETACH)
		s.kill()
		s.ctrl.Close()
		if s.stderr.Len() > 0 {
			t.Logf("FUSE server at %s said:\n%s", target, s.stderr)
		}
	})
	s.await("init")
	return s
}

// await waits for the server to print want.
func (s *FUSEServer) await(want string) {
	s.t.Helper()
	timer := time.NewTimer(fuseOpTimeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-s.acks:
			switch {
			case !ok:
				<-s.exited
				s.t.Fatalf("FUSE server at %s exited before %q: %s", s.target, want, s.stderr)
			case line == want:
				return
			}
		case <-timer.C:
			s.t.Fatalf("FUSE server at %s: no %q within %s", s.target, want, fuseOpTimeout)
		}
	}
}

// Stop makes the server stop answering: every request it gets from now on
// (a stat of the mount, say) stays unanswered, so the call that made it
// hangs until the server is killed or the connection aborted. It returns
// once the server has acknowledged.
func (s *FUSEServer) Stop() {
	s.t.Helper()
	if _, err := fmt.Fprintln(s.ctrl, "stop"); err != nil {
		s.t.Fatalf("stop the FUSE server: %v", err)
	}
	s.await("stopped")
}

// Kill SIGKILLs the server and waits until it is gone. Its end of the
// connection is then closed, so the kernel aborts the connection: calls
// blocked in it return, and every later access to the mount fails with
// ENOTCONN. The mount itself stays, as after a FUSE daemon crash.
func (s *FUSEServer) Kill() {
	s.t.Helper()
	if !s.kill() {
		s.t.Fatalf("FUSE server at %s did not exit within %s of SIGKILL", s.target, fuseOpTimeout)
	}
}

func (s *FUSEServer) kill() bool {
	if s.killed.CompareAndSwap(false, true) {
		_ = s.cmd.Process.Kill()
	}
	select {
	case <-s.exited:
		return true
	case <-time.After(fuseOpTimeout):
		return false
	}
}

// The server side, in the child process.

// FUSE opcodes and constants from <linux/fuse.h>.
const (
	fuseLookup      = 1
	fuseForget      = 2
	fuseGetattr     = 3
	fuseStatfs      = 17
	fuseInit        = 26
	fuseOpendir     = 27
	fuseReaddir     = 28
	fuseReleasedir  = 29
	fuseInterrupt   = 36
	fuseDestroy     = 38
	fuseBatchForget = 42

	fuseKernelVersion = 7
	fuseMinorVersion  = 38 // the minor of the <linux/fuse.h> these structs follow
	fuseRootID        = 1

	fuseInHeaderSize = 40 // struct fuse_in_header
	fuseInitInSize   = 16 // struct fuse_init_in up to flags (more follows from 7.36)
	fuseMaxWrite     = 128 << 10
	// The kernel wants a read buffer of at least the header, a write
	// request and max_write bytes, and at least FUSE_MIN_READ_BUFFER.
	fuseReadBuffer = 1<<20 + 64<<10
)

// fuseInHeader is struct fuse_in_header.
type fuseInHeader struct {
	Len         uint32
	Opcode      uint32
	Unique      uint64
	NodeID      uint64
	UID         uint32
	GID         uint32
	PID         uint32
	TotalExtlen uint16
	Padding     uint16
}

// fuseOutHeader is struct fuse_out_header.
type fuseOutHeader struct {
	Len    uint32
	Error  int32
	Unique uint64
}

// fuseInitIn is the start of struct fuse_init_in.
type fuseInitIn struct {
	Major        uint32
	Minor        uint32
	MaxReadahead uint32
	Flags        uint32
}

// fuseInitOut is struct fuse_init_out (64 bytes).
type fuseInitOut struct {
	Major               uint32
	Minor               uint32
	MaxReadahead        uint32
	Flags               uint32
	MaxBackground       uint16
	CongestionThreshold uint16
	MaxWrite            uint32
	TimeGran            uint32
	MaxPages            uint16
	MapAlignment        uint16
	Flags2              uint32
	Unused              [7]uint32
}

// fuseAttr is struct fuse_attr (88 bytes).
type fuseAttr struct {
	Ino, Size, Blocks, Atime, Mtime, Ctime uint64
	Atimensec, Mtimensec, Ctimensec        uint32
	Mode, Nlink, UID, GID, Rdev, Blksize   uint32
	Flags                                  uint32
}

// fuseAttrOut is struct fuse_attr_out (104 bytes).
type fuseAttrOut struct {
	AttrValid     uint64
	AttrValidNsec uint32
	Dummy         uint32
	Attr          fuseAttr
}

// fuseOpenOut is struct fuse_open_out.
type fuseOpenOut struct {
	Fh        uint64
	OpenFlags uint32
	Padding   uint32
}

// fuseStatfsOut is struct fuse_statfs_out, i.e. struct fuse_kstatfs (80 bytes).
type fuseStatfsOut struct {
	Blocks, Bfree, Bavail, Files, Ffree uint64
	Bsize, Namelen, Frsize, Padding     uint32
	Spare                               [6]uint32
}

// fuseServer serves one FUSE connection.
type fuseServer struct {
	fd      int
	stopped atomic.Bool
	out     sync.Mutex // serialises acknowledgements on stdout
}

// fuseServerMain runs in the child: fd 3 is the connection, commands come
// on stdin ("stop"), acknowledgements go to stdout ("init", "stopped").
func fuseServerMain() int {
	s := &fuseServer{fd: 3}
	if err := unix.SetNonblock(s.fd, false); err != nil {
		fmt.Fprintln(os.Stderr, "fuse server:", err)
		return 1
	}
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "stop" {
				s.stopped.Store(true)
				s.ack("stopped")
			}
		}
		// The test process is gone: so is the reason to serve.
		os.Exit(0)
	}()
	return s.serve()
}

func (s *fuseServer) ack(line string) {
	s.out.Lock()
	defer s.out.Unlock()
	fmt.Fprintln(os.Stdout, line)
}

func (s *fuseServer) serve() int {
	buf := make([]byte, fuseReadBuffer)
	for {
		n, err := unix.Read(s.fd, buf)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOENT):
			continue // ENOENT: the request was interrupted before we read it
		case errors.Is(err, unix.ENODEV):
			return 0 // unmounted, or the connection was aborted
		case err != nil:
			fmt.Fprintln(os.Stderr, "fuse server: read:", err)
			return 1
		case n < fuseInHeaderSize:
			fmt.Fprintf(os.Stderr, "fuse server: short request of %d bytes\n", n)
			return 1
		}
		if s.stopped.Load() {
			continue // read and never answered: the caller hangs
		}
		var h fuseInHeader
		if _, err := binary.Decode(buf[:fuseInHeaderSize], binary.LittleEndian, &h); err != nil {
			fmt.Fprintln(os.Stderr, "fuse server: header:", err)
			return 1
		}
		if err := s.handle(h, buf[fuseInHeaderSize:n]); err != nil {
			fmt.Fprintln(os.Stderr, "fuse server:", err)
			return 1
		}
	}
}

// handle answers one request. The root (node 1) is an empty directory
// owned by the test's user; nothing else exists.
func (s *fuseServer) handle(h fuseInHeader, body []byte) error {
	switch h.Opcode {
	case fuseInit:
		var in fuseInitIn
		if len(body) < fuseInitInSize {
			return fmt.Errorf("FUSE_INIT of %d bytes", len(body))
		}
		if _, err := binary.Decode(body[:fuseInitInSize], binary.LittleEndian, &in); err != nil {
			return err
		}
		if in.Major != fuseKernelVersion {
			return fmt.Errorf("kernel speaks FUSE %d.%d, not %d.x", in.Major, in.Minor, fuseKernelVersion)
		}
		out := fuseInitOut{Major: fuseKernelVersion, Minor: min(in.Minor, fuseMinorVersion),
			MaxReadahead: in.MaxReadahead, MaxWrite: fuseMaxWrite, TimeGran: 1}
		if err := s.reply(h, 0, out); err != nil {
			return err
		}
		s.ack("init")
		return nil
	case fuseGetattr:
		if h.NodeID != fuseRootID {
			return s.reply(h, unix.ENOENT, nil)
		}
		// AttrValid 0: the kernel caches nothing, every stat asks again.
		return s.reply(h, 0, fuseAttrOut{Attr: fuseAttr{Ino: fuseRootID, Mode: unix.S_IFDIR | 0o755, Nlink: 2,
			UID: h.UID, GID: h.GID, Blksize: 4096}})
	case fuseLookup:
		return s.reply(h, unix.ENOENT, nil)
	case fuseOpendir:
		return s.reply(h, 0, fuseOpenOut{Fh: 1})
	case fuseReaddir:
		return s.reply(h, 0, nil) // no entries: end of directory
	case fuseReleasedir, fuseDestroy:
		return s.reply(h, 0, nil)
	case fuseStatfs:
		return s.reply(h, 0, fuseStatfsOut{Bsize: 4096, Namelen: 255, Frsize: 4096})
	case fuseForget, fuseBatchForget, fuseInterrupt:
		return nil // never answered
	}
	return s.reply(h, unix.ENOSYS, nil)
}

// reply writes one answer: the header, then the payload (a struct or nil).
func (s *fuseServer) reply(h fuseInHeader, errno syscall.Errno, payload any) error {
	var body []byte
	if payload != nil {
		var err error
		if body, err = binary.Append(nil, binary.LittleEndian, payload); err != nil {
			return err
		}
	}
	out := fuseOutHeader{Len: uint32(16 + len(body)), Error: -int32(errno), Unique: h.Unique}
	msg, err := binary.Append(nil, binary.LittleEndian, out)
	if err != nil {
		return err
	}
	msg = append(msg, body...)
	if _, err := unix.Write(s.fd, msg); err != nil && !errors.Is(err, unix.ENOENT) {
		// ENOENT: the request was interrupted or aborted meanwhile.
		return fmt.Errorf("reply to opcode %d: %w", h.Opcode, err)
	}
	return nil
}
