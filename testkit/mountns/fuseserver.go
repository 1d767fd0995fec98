//go:build linux

package mountns

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A minimal FUSE server for tests: a read-only tree (an empty root
// directory unless told otherwise), served by a child process (this test
// binary run again) so that a test can SIGKILL it, like a FUSE daemon that
// crashes, tell it to stop answering, like one stuck on its network after
// reading a request, slow it down, or make a directory of it endless. The
// wire format is the kernel's FUSE ABI (<linux/fuse.h>), protocol 7.x,
// little-endian.

// fuseServerEnv, set in the environment of this binary, makes it serve the
// FUSE connection on fd 3 instead of running tests (see init below), with
// the FUSEOptions in fuseOptionsEnv.
const (
	fuseServerEnv  = "VOLRECON_TEST_FUSE_SERVER"
	fuseOptionsEnv = "VOLRECON_TEST_FUSE_OPTIONS"
)

// FUSEOptions say what a ServeFUSEWith filesystem holds and how it answers.
type FUSEOptions struct {
	// Tree is what lies below the root: "a/b/" is a directory, "a/f" an
	// empty file, "a/f=text" a file holding text; parents are implied.
	Tree []string `json:"tree,omitempty"`
	// Endless names a directory ("" is the root, else one of Tree) whose
	// listing never ends: every READDIR answers with names never seen
	// before, as a full page.
	Endless []string `json:"endless,omitempty"`
	// Delay is how long the server waits before each answer (requests are
	// served one at a time).
	Delay time.Duration `json:"delay,omitempty"`
}

// FUSEStats counts the requests the server read, by opcode name
// ("LOOKUP", "GETATTR", "READDIR", ...; FUSE_INIT, the mount's own, is not
// counted), and those it read and left unanswered once stopped.
type FUSEStats struct {
	Requests   map[string]int `json:"requests"`
	Unanswered int            `json:"unanswered"`
}

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
	t      testing.TB
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
func ServeFUSE(t testing.TB, target string) *FUSEServer {
	t.Helper()
	return ServeFUSEWith(t, target, FUSEOptions{})
}

// ServeFUSEWith is ServeFUSE of the filesystem opts describe.
func ServeFUSEWith(t testing.TB, target string, opts FUSEOptions) *FUSEServer {
	t.Helper()
	optsJSON, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/fuse: %v", err)
	}
	dev := os.NewFile(uintptr(fd), "/dev/fuse")
	defer dev.Close() // the server holds the connection from now on
	mountOpts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=%d,group_id=%d", fd, os.Getuid(), os.Getgid())
	if err := unix.Mount("volrecon-served", target, FUSEFSType, unix.MS_NOSUID|unix.MS_NODEV, mountOpts); err != nil {
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
	s.cmd.Env = append(os.Environ(), fuseServerEnv+"=1", fuseOptionsEnv+"="+string(optsJSON))
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

// await waits for the server to print want, or a line starting with want
// and a space, and returns the rest of that line.
func (s *FUSEServer) await(want string) string {
	s.t.Helper()
	timer := time.NewTimer(fuseOpTimeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-s.acks:
			switch rest, found := strings.CutPrefix(line, want+" "); {
			case !ok:
				<-s.exited
				s.t.Fatalf("FUSE server at %s exited before %q: %s", s.target, want, s.stderr)
			case line == want:
				return ""
			case found:
				return rest
			}
		case <-timer.C:
			s.t.Fatalf("FUSE server at %s: no %q within %s", s.target, want, fuseOpTimeout)
		}
	}
}

// command sends a command to the server and returns the rest of its
// acknowledgement.
func (s *FUSEServer) command(cmd, ack string) string {
	s.t.Helper()
	if _, err := fmt.Fprintln(s.ctrl, cmd); err != nil {
		s.t.Fatalf("FUSE server at %s: %s: %v", s.target, cmd, err)
	}
	return s.await(ack)
}

// Stats returns what the server has read so far.
func (s *FUSEServer) Stats() FUSEStats {
	s.t.Helper()
	var st FUSEStats
	if err := json.Unmarshal([]byte(s.command("stats", "stats")), &st); err != nil {
		s.t.Fatalf("FUSE server at %s: stats: %v", s.target, err)
	}
	return st
}

// Abort aborts the connection through the fusectl filesystem
// (/sys/fs/fuse/connections/<n>/abort, mounted there in the test's mount
// namespace if it is not): every request waiting for an answer, read by the
// server or not, fails with ECONNABORTED, and every later access to the
// mount with ENOTCONN; the server lives on. It is the kernel's way out of a
// wait that no signal ends.
func (s *FUSEServer) Abort() {
	s.t.Helper()
	dir, err := FUSEConnection(s.target)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "abort"), []byte("1"), 0); err != nil {
		s.t.Fatalf("abort the FUSE connection of %s: %v", s.target, err)
	}
}

// fuseConnectionsDir is where the fusectl filesystem is mounted.
const fuseConnectionsDir = "/sys/fs/fuse/connections"

// FUSEConnection returns the fusectl dir of the FUSE mount at target,
// /sys/fs/fuse/connections/<n> where n is the mount's device minor (from
// the mount table: a stat of the mount would be a request to its daemon).
// It mounts fusectl there when nothing is mounted yet.
func FUSEConnection(target string) (string, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	minor := ""
	fusectl := false
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if f[4] == fuseConnectionsDir {
			fusectl = true
		}
		if f[4] == target {
			_, minor, _ = strings.Cut(f[2], ":")
		}
	}
	if minor == "" {
		return "", fmt.Errorf("no mount at %s in the mount table", target)
	}
	if !fusectl {
		if err := unix.Mount("fusectl", fuseConnectionsDir, "fusectl", 0, ""); err != nil {
			return "", fmt.Errorf("mount fusectl on %s: %w", fuseConnectionsDir, err)
		}
	}
	return filepath.Join(fuseConnectionsDir, minor), nil
}

// Stop makes the server stop answering: every request it gets from now on
// (a stat of the mount, say) stays unanswered, so the call that made it
// hangs until the server is killed or the connection aborted. It returns
// once the server has acknowledged.
func (s *FUSEServer) Stop() {
	s.t.Helper()
	s.command("stop", "stopped")
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
	fuseOpen        = 14
	fuseRead        = 15
	fuseStatfs      = 17
	fuseRelease     = 18
	fuseFlush       = 25
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
	fuseReadInSize   = 40 // struct fuse_read_in
	fuseDirentSize   = 24 // struct fuse_dirent without its name
	fuseMaxWrite     = 128 << 10
	// The kernel wants a read buffer of at least the header, a write
	// request and max_write bytes, and at least FUSE_MIN_READ_BUFFER.
	fuseReadBuffer = 1<<20 + 64<<10

	fuseDTDir = 4 // DT_DIR
	fuseDTReg = 8 // DT_REG
)

var fuseOpNames = map[uint32]string{
	fuseLookup: "LOOKUP", fuseForget: "FORGET", fuseGetattr: "GETATTR", fuseOpen: "OPEN", fuseRead: "READ",
	fuseStatfs: "STATFS", fuseRelease: "RELEASE", fuseFlush: "FLUSH", fuseInit: "INIT", fuseOpendir: "OPENDIR",
	fuseReaddir: "READDIR", fuseReleasedir: "RELEASEDIR", fuseInterrupt: "INTERRUPT", fuseDestroy: "DESTROY",
	fuseBatchForget: "BATCH_FORGET",
}

func fuseOpName(op uint32) string {
	if n, ok := fuseOpNames[op]; ok {
		return n
	}
	return "OP" + strconv.Itoa(int(op))
}

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

// fuseEntryOut is struct fuse_entry_out (128 bytes).
type fuseEntryOut struct {
	NodeID         uint64
	Generation     uint64
	EntryValid     uint64
	AttrValid      uint64
	EntryValidNsec uint32
	AttrValidNsec  uint32
	Attr           fuseAttr
}

// fuseOpenOut is struct fuse_open_out.
type fuseOpenOut struct {
	Fh        uint64
	OpenFlags uint32
	Padding   uint32
}

// fuseReadIn is struct fuse_read_in (40 bytes).
type fuseReadIn struct {
	Fh        uint64
	Offset    uint64
	Size      uint32
	ReadFlags uint32
	LockOwner uint64
	Flags     uint32
	Padding   uint32
}

// fuseStatfsOut is struct fuse_statfs_out, i.e. struct fuse_kstatfs (80 bytes).
type fuseStatfsOut struct {
	Blocks, Bfree, Bavail, Files, Ffree uint64
	Bsize, Namelen, Frsize, Padding     uint32
	Spare                               [6]uint32
}

// fuseNode is one file or directory of the served tree.
type fuseNode struct {
	id       uint64
	dir      bool
	endless  bool
	content  string
	children []string             // names, in order
	child    map[string]*fuseNode // by name
}

// fuseTree builds the nodes of opts: the root is node 1.
func fuseTree(opts FUSEOptions) (map[uint64]*fuseNode, error) {
	root := &fuseNode{id: fuseRootID, dir: true, child: map[string]*fuseNode{}}
	nodes := map[uint64]*fuseNode{fuseRootID: root}
	find := func(p string, dir bool) *fuseNode {
		n := root
		for _, name := range strings.Split(p, "/") {
			if name == "" {
				continue
			}
			c, ok := n.child[name]
			if !ok {
				c = &fuseNode{id: uint64(len(nodes) + 1), dir: true, child: map[string]*fuseNode{}}
				nodes[c.id] = c
				n.child[name] = c
				n.children = append(n.children, name)
			}
			n = c
		}
		if !dir {
			n.dir = false
		}
		return n
	}
	for _, entry := range opts.Tree {
		p, content, hasContent := strings.Cut(entry, "=")
		n := find(p, strings.HasSuffix(p, "/"))
		if hasContent {
			n.content = content
		}
	}
	for _, p := range opts.Endless {
		n := find(p, true)
		if !n.dir {
			return nil, fmt.Errorf("endless %q is not a directory", p)
		}
		n.endless = true
	}
	return nodes, nil
}

// fuseServer serves one FUSE connection.
type fuseServer struct {
	fd      int
	opts    FUSEOptions
	nodes   map[uint64]*fuseNode
	stopped atomic.Bool
	out     sync.Mutex // serialises acknowledgements on stdout

	statsMu sync.Mutex
	stats   FUSEStats
}

// fuseServerMain runs in the child: fd 3 is the connection, commands come
// on stdin ("stop", "stats"), acknowledgements go to stdout ("init",
// "stopped", "stats <json>").
func fuseServerMain() int {
	s := &fuseServer{fd: 3, stats: FUSEStats{Requests: map[string]int{}}}
	if err := json.Unmarshal([]byte(os.Getenv(fuseOptionsEnv)), &s.opts); err != nil {
		fmt.Fprintln(os.Stderr, "fuse server: options:", err)
		return 1
	}
	var err error
	if s.nodes, err = fuseTree(s.opts); err != nil {
		fmt.Fprintln(os.Stderr, "fuse server:", err)
		return 1
	}
	if err := unix.SetNonblock(s.fd, false); err != nil {
		fmt.Fprintln(os.Stderr, "fuse server:", err)
		return 1
	}
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			switch sc.Text() {
			case "stop":
				s.stopped.Store(true)
				s.ack("stopped")
			case "stats":
				s.statsMu.Lock()
				b, _ := json.Marshal(s.stats)
				s.statsMu.Unlock()
				s.ack("stats " + string(b))
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

// count records a request read; unanswered: it is left so.
func (s *fuseServer) count(op uint32, unanswered bool) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	s.stats.Requests[fuseOpName(op)]++
	if unanswered {
		s.stats.Unanswered++
	}
}

func (s *fuseServer) serve() int {
	buf := make([]byte, fuseReadBuffer)
	for {
		n, err := unix.Read(s.fd, buf)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOENT):
			continue // ENOENT: the request was interrupted before we read it
		case errors.Is(err, unix.ENODEV), errors.Is(err, unix.ECONNABORTED):
			return 0 // unmounted, or the connection was aborted
		case err != nil:
			fmt.Fprintln(os.Stderr, "fuse server: read:", err)
			return 1
		case n < fuseInHeaderSize:
			fmt.Fprintf(os.Stderr, "fuse server: short request of %d bytes\n", n)
			return 1
		}
		var h fuseInHeader
		if _, err := binary.Decode(buf[:fuseInHeaderSize], binary.LittleEndian, &h); err != nil {
			fmt.Fprintln(os.Stderr, "fuse server: header:", err)
			return 1
		}
		stopped := s.stopped.Load()
		if h.Opcode != fuseInit { // the mount's, not the tested code's
			s.count(h.Opcode, stopped && !noReply(h.Opcode))
		}
		if stopped {
			continue // read and never answered: the caller hangs
		}
		if s.opts.Delay > 0 && h.Opcode != fuseInit {
			time.Sleep(s.opts.Delay)
		}
		if err := s.handle(h, buf[fuseInHeaderSize:n]); err != nil {
			fmt.Fprintln(os.Stderr, "fuse server:", err)
			return 1
		}
	}
}

// noReply: the kernel expects no answer to op.
func noReply(op uint32) bool {
	return op == fuseForget || op == fuseBatchForget || op == fuseInterrupt
}

// attr is the fuse_attr of n, owned by the caller.
func (n *fuseNode) attr(h fuseInHeader) fuseAttr {
	a := fuseAttr{Ino: n.id, Mode: unix.S_IFDIR | 0o755, Nlink: 2, UID: h.UID, GID: h.GID, Blksize: 4096}
	if !n.dir {
		a.Mode, a.Nlink, a.Size = unix.S_IFREG|0o644, 1, uint64(len(n.content))
	}
	return a
}

// handle answers one request. Attributes and entries are never cached by
// the kernel (valid 0): every stat and every path walk asks again.
func (s *fuseServer) handle(h fuseInHeader, body []byte) error {
	node := s.nodes[h.NodeID]
	switch h.Opcode {
	case fuseInit:
		return s.init(h, body)
	case fuseGetattr:
		if node == nil {
			return s.reply(h, unix.ENOENT, nil)
		}
		return s.reply(h, 0, fuseAttrOut{Attr: node.attr(h)})
	case fuseLookup:
		var c *fuseNode
		if node != nil {
			c = node.child[string(bytes.TrimRight(body, "\x00"))]
		}
		if c == nil {
			return s.reply(h, unix.ENOENT, nil)
		}
		return s.reply(h, 0, fuseEntryOut{NodeID: c.id, Attr: c.attr(h)})
	case fuseOpendir, fuseOpen:
		return s.reply(h, 0, fuseOpenOut{Fh: h.NodeID})
	case fuseReaddir, fuseRead:
		var in fuseReadIn
		if len(body) < fuseReadInSize {
			return fmt.Errorf("%s of %d bytes", fuseOpName(h.Opcode), len(body))
		}
		if _, err := binary.Decode(body[:fuseReadInSize], binary.LittleEndian, &in); err != nil {
			return err
		}
		if node == nil {
			return s.reply(h, unix.ENOENT, nil)
		}
		if h.Opcode == fuseRead {
			return s.replyBytes(h, readAt(node.content, in.Offset, in.Size))
		}
		return s.replyBytes(h, node.dirents(in.Offset, in.Size))
	case fuseReleasedir, fuseRelease, fuseFlush, fuseDestroy:
		return s.reply(h, 0, nil)
	case fuseStatfs:
		return s.reply(h, 0, fuseStatfsOut{Bsize: 4096, Namelen: 255, Frsize: 4096})
	case fuseForget, fuseBatchForget, fuseInterrupt:
		return nil // never answered
	}
	return s.reply(h, unix.ENOSYS, nil)
}

func (s *fuseServer) init(h fuseInHeader, body []byte) error {
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
}

// readAt is the part of content a READ at offset of size gets.
func readAt(content string, offset uint64, size uint32) []byte {
	if offset >= uint64(len(content)) {
		return nil
	}
	end := min(offset+uint64(size), uint64(len(content)))
	return []byte(content[offset:end])
}

// dirents is a READDIR answer of n from offset (the index of the next
// entry) within size bytes: its children in order, or for an endless dir
// as many fresh names as fit, every time.
func (n *fuseNode) dirents(offset uint64, size uint32) []byte {
	var out []byte
	for i := offset; ; i++ {
		var name string
		typ, ino := uint32(fuseDTDir), uint64(1<<32)+i
		switch {
		case n.endless:
			name = fmt.Sprintf("endless-%012d", i)
		case i < uint64(len(n.children)):
			name = n.children[i]
			c := n.child[name]
			ino = c.id
			if !c.dir {
				typ = fuseDTReg
			}
		default:
			return out
		}
		rec := (fuseDirentSize + len(name) + 7) &^ 7
		if len(out)+rec > int(size) {
			return out
		}
		out = binary.LittleEndian.AppendUint64(out, ino)
		out = binary.LittleEndian.AppendUint64(out, i+1) // the offset of the next entry
		out = binary.LittleEndian.AppendUint32(out, uint32(len(name)))
		out = binary.LittleEndian.AppendUint32(out, typ)
		out = append(out, name...)
		out = append(out, make([]byte, rec-fuseDirentSize-len(name))...)
	}
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
	return s.write(h, errno, body)
}

// replyBytes writes one answer of raw bytes.
func (s *fuseServer) replyBytes(h fuseInHeader, body []byte) error { return s.write(h, 0, body) }

func (s *fuseServer) write(h fuseInHeader, errno syscall.Errno, body []byte) error {
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
