//go:build linux

package mountscan

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A helper process for the tests of ReadStatmount: this test binary run
// again, in a mount namespace of its own that is a copy of the test's
// (propagation unchanged: its mounts are peers and slaves of the test's),
// or chrooted, where it mounts, changes propagation and compares its own
// table read both ways, as the test tells it on its stdin.

const statmountHelperEnv = "VOLRECON_TEST_STATMOUNT_HELPER"

func init() {
	if os.Getenv(statmountHelperEnv) == "1" {
		os.Exit(statmountHelperMain(os.Stdin, os.Stdout))
	}
}

// helperCmd is one order to the helper.
type helperCmd struct {
	Op     string  `json:"op"` // mount, umount, chroot, compare, source, exit
	Path   string  `json:"path,omitempty"`
	Source string  `json:"source,omitempty"`
	FSType string  `json:"fstype,omitempty"`
	Flags  uintptr `json:"flags,omitempty"`
	Data   string  `json:"data,omitempty"`
}

// helperReply is the helper's answer: an error, or for compare the
// difference between its two tables ("" when equal) and its table read
// from mountinfo.
type helperReply struct {
	Err       string `json:"err,omitempty"`
	Diff      string `json:"diff,omitempty"`
	Mountinfo string `json:"mountinfo,omitempty"`
	// For source: how the Source read, and why not by statmount.
	Method         string `json:"method,omitempty"`
	Unavailable    bool   `json:"unavailable,omitempty"`
	StatmountError string `json:"statmountError,omitempty"`
}

func statmountHelperMain(in io.Reader, out io.Writer) int {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var cmd helperCmd
		if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if cmd.Op == "exit" {
			return 0
		}
		if err := enc.Encode(cmd.run()); err != nil {
			return 2
		}
	}
	return 0
}

func (c helperCmd) run() helperReply {
	var err error
	switch c.Op {
	case "mount":
		if c.FSType != "" { // a new mount: the dir may not be there (nothing else is looked at)
			err = os.MkdirAll(c.Path, 0o755)
		}
		if err == nil {
			err = unix.Mount(c.Source, c.Path, c.FSType, c.Flags, c.Data)
		}
	case "umount":
		err = unix.Unmount(c.Path, unix.MNT_DETACH)
	case "chroot":
		if err = unix.Chroot(c.Path); err == nil {
			err = os.Chdir("/")
		}
	case "compare":
		return compareOwnTable()
	case "source":
		return readSource(c.Path)
	default:
		err = fmt.Errorf("unknown op %q", c.Op)
	}
	if err != nil {
		return helperReply{Err: err.Error()}
	}
	return helperReply{}
}

// compareOwnTable reads the helper's own table by statmount (watched) and
// from mountinfo.
func compareOwnTable() helperReply {
	w, err := Watch(DefaultPath)
	if err != nil {
		return helperReply{Err: err.Error()}
	}
	defer w.Close()
	ctx := context.Background()
	got, err := ReadStatmount(ctx, StatmountRead{Watch: w})
	if err != nil {
		return helperReply{Err: "statmount: " + err.Error()}
	}
	want, err := ReadFile(ctx, DefaultPath, 0)
	if err != nil {
		return helperReply{Err: "mountinfo: " + err.Error()}
	}
	return helperReply{Diff: diffTables(got, want), Mountinfo: formatTable(want)}
}

// readSource reads the table at path through a Source asked for
// statmount, and compares it with the file's.
func readSource(path string) helperReply {
	ctx := context.Background()
	got, err := Source{Path: path, Method: MethodStatmount}.ReadScoped(ctx, nil)
	if err != nil {
		return helperReply{Err: "source: " + err.Error()}
	}
	want, err := ReadFile(ctx, path, 0)
	if err != nil {
		return helperReply{Err: "mountinfo: " + err.Error()}
	}
	return helperReply{
		Diff: diffTables(got, want), Method: string(got.Method()),
		Unavailable: errors.Is(got.StatmountError(), ErrStatmountUnavailable), StatmountError: fmt.Sprint(got.StatmountError()),
	}
}

// nsHelper is a running helper.
type nsHelper struct {
	t   testing.TB
	cmd *exec.Cmd
	in  io.WriteCloser
	out *json.Decoder
}

// startHelper starts a helper, in a new mount namespace (a copy of the
// caller's, propagation unchanged) when newNS, else in the caller's.
func startHelper(t testing.TB, newNS bool) *nsHelper {
	t.Helper()
	var attr *syscall.SysProcAttr
	if newNS {
		// Cloneflags, not Unshareflags: Go makes every mount private only
		// for the latter.
		attr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	}
	return runHelper(t, attr)
}

// startUserNSHelper starts a helper in a user namespace of its own (root
// there, mapped to root), with a mount namespace it owns: it has no
// privilege over the test's.
func startUserNSHelper(t testing.TB) *nsHelper {
	t.Helper()
	return runHelper(t, &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
	})
}

func runHelper(t testing.TB, attr *syscall.SysProcAttr) *nsHelper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), statmountHelperEnv+"=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = attr
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	h := &nsHelper{t: t, cmd: cmd, in: in, out: json.NewDecoder(out)}
	t.Cleanup(h.stop)
	return h
}

func (h *nsHelper) do(cmd helperCmd) helperReply {
	h.t.Helper()
	b, err := json.Marshal(cmd)
	require.NoError(h.t, err)
	_, err = h.in.Write(append(b, '\n'))
	require.NoError(h.t, err)
	var r helperReply
	require.NoError(h.t, h.out.Decode(&r), "helper answer to %s", cmd.Op)
	return r
}

func (h *nsHelper) pid() int { return h.cmd.Process.Pid }

// mountinfo is the path of the helper's mount table.
func (h *nsHelper) mountinfo() string { return fmt.Sprintf("/proc/%d/mountinfo", h.pid()) }

// namespaceID is the ID of the helper's mount namespace.
func (h *nsHelper) namespaceID() uint64 {
	h.t.Helper()
	id, err := MountNamespaceID(fmt.Sprintf("/proc/%d/ns/mnt", h.pid()))
	require.NoError(h.t, err)
	return id
}

func (h *nsHelper) stop() {
	if h.cmd.ProcessState != nil {
		return
	}
	_, _ = h.in.Write([]byte(`{"op":"exit"}` + "\n"))
	_ = h.in.Close()
	_ = h.cmd.Wait()
}

// diffTables says how got differs from want, entry by entry, every field
// compared; "" when they are equal.
func diffTables(got, want *Table) string {
	var b strings.Builder
	g, w := got.Mounts(), want.Mounts()
	for i := range max(len(g), len(w)) {
		var gs, ws string
		if i < len(g) {
			gs = fmt.Sprintf("%#v", g[i])
		}
		if i < len(w) {
			ws = fmt.Sprintf("%#v", w[i])
		}
		if gs != ws {
			fmt.Fprintf(&b, "entry %d:\n  statmount: %s\n  mountinfo: %s\n", i, gs, ws)
		}
	}
	if got.Skipped() != want.Skipped() {
		fmt.Fprintf(&b, "skipped: statmount %d, mountinfo %d\n", got.Skipped(), want.Skipped())
	}
	return b.String()
}

// formatTable writes a table back as mountinfo text (test mounts hold no
// secret).
func formatTable(t *Table) string {
	var b strings.Builder
	for _, m := range t.Mounts() {
		b.WriteString(FormatLine(m))
		b.WriteByte('\n')
	}
	return b.String()
}

// evalDir is t.TempDir without symlinks in its path.
func evalDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return dir
}
