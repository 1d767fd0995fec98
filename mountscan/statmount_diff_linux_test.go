//go:build linux

package mountscan

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// The flags of TestStatmountDifferential; they reach the child that runs
// it in a private mount namespace through the environment.
var (
	statmountSteps = flag.Int("statmount.steps", 40, "TestStatmountDifferential: steps of the random sequence")
	statmountSeed  = flag.Uint64("statmount.seed", 1, "TestStatmountDifferential: seed of the random sequence")
)

const (
	statmountStepsEnv = "VOLRECON_TEST_STATMOUNT_STEPS"
	statmountSeedEnv  = "VOLRECON_TEST_STATMOUNT_SEED"
)

// TestStatmountDifferential makes a random, seeded sequence of mounts in a
// private mount namespace (tmpfs with options, binds and recursive binds,
// ext4 on a loop device, FUSE, idmapped binds, unlinked bind roots, stacks,
// moves, remounts of the mount and of the superblock, propagation changes,
// unmounts; names with spaces, tabs, newlines and backslashes), some of it
// in a nested namespace that is a copy of the first (its mounts peers and
// slaves of the first's, so master: and propagate_from: appear). After each
// step it compares, field by field and in order, the table listmount and
// statmount give with the one mountinfo gives:
//   - the test's own namespace, whole and within a random scope;
//   - the nested namespace, read from inside it;
//   - the nested namespace, read from outside by its ID (never a different
//     table: the same, or unavailable exactly when a slave's propagate_from
//     cannot be known there), and through a Source on its mountinfo.
//
// Replay a failure with -statmount.seed; -statmount.steps makes it longer
// (make test runs 40 steps).
func TestStatmountDifferential(t *testing.T) {
	if os.Getenv(statmountStepsEnv) == "" { // not in the child: pass the flags on
		t.Setenv(statmountStepsEnv, strconv.Itoa(*statmountSteps))
		t.Setenv(statmountSeedEnv, strconv.FormatUint(*statmountSeed, 10))
	}
	if !mountns.Enter(t) {
		return
	}
	steps, err := strconv.Atoi(os.Getenv(statmountStepsEnv))
	require.NoError(t, err)
	seed, err := strconv.ParseUint(os.Getenv(statmountSeedEnv), 10, 64)
	require.NoError(t, err)
	w := newMountWorld(t, seed)
	for step := range steps {
		op := w.step()
		w.compare(fmt.Sprintf("seed %d step %d (%s)", seed, step, op))
	}
	t.Logf("seed %d, %d steps: %d ops took effect, %d failed as the kernel refused them", seed, steps, w.done, w.refused)
	t.Logf("tables compared that held: %v", w.seen)
}

// mountWorld is what the random sequence made.
type mountWorld struct {
	t       *testing.T
	r       *rand.Rand
	base    string     // a tmpfs everything is made in
	dirs    []string   // directories made, where mounts go
	mounts  []mountRec // the mounts made, bottom first
	ext4    string     // a loop device holding ext4
	fuse    int        // FUSE mounts made
	userns  string     // a user namespace for idmapped mounts
	nested  *nsHelper  // the nested namespace, once made
	watch   *Watcher   // the test's own mountinfo
	done    int
	refused int
	names   int
	seen    map[string]int // how many tables compared held each feature
}

type mountRec struct {
	path string
	kind string // tmpfs, bind, ext4, fuse, file
}

func newMountWorld(t *testing.T, seed uint64) *mountWorld {
	w := &mountWorld{t: t, r: rand.New(rand.NewPCG(seed, seed^0x5eed)), base: filepath.Join(evalDir(t), "base"), seen: map[string]int{}}
	mountns.Mount(t, "volrecon-statmount", w.base, "tmpfs", 0, "size=16m")
	// Shared, so that what is mounted in it reaches the nested namespace,
	// made later, as peers and slaves of the mounts here.
	require.NoError(t, unix.Mount("", w.base, "", unix.MS_SHARED, ""))
	w.dirs = []string{w.base}
	w.watch = watchSelf(t)
	t.Cleanup(func() { _ = unix.Unmount(w.base, unix.MNT_DETACH) }) // everything made below it
	return w
}

// name is a fresh file name, often with the bytes mountinfo escapes.
func (w *mountWorld) name() string {
	w.names++
	odd := []string{"", "", "", " ", "\t", "\n", "\\", " a\\b", `\040`, "x y\nz"}
	return "n" + strconv.Itoa(w.names) + odd[w.r.IntN(len(odd))]
}

// newDir makes a directory under base or under a mount made, where it can.
func (w *mountWorld) newDir() string {
	parent := w.base
	if len(w.mounts) > 0 && w.r.IntN(2) == 0 {
		if m := w.mounts[w.r.IntN(len(w.mounts))]; m.kind == "tmpfs" || m.kind == "bind" || m.kind == "ext4" {
			parent = m.path
		}
	}
	dir := filepath.Join(parent, w.name())
	if os.Mkdir(dir, 0o755) != nil { // a read-only or gone parent
		dir = filepath.Join(w.base, w.name())
		require.NoError(w.t, os.Mkdir(dir, 0o755))
	}
	w.dirs = append(w.dirs, dir)
	return dir
}

// someMount is one of the mounts made, if any.
func (w *mountWorld) someMount() (mountRec, bool) {
	if len(w.mounts) == 0 {
		return mountRec{}, false
	}
	return w.mounts[w.r.IntN(len(w.mounts))], true
}

// mountFlags draws per-mount and superblock flags, mand aside (see
// TestStatmountMandIsNotReported).
func (w *mountWorld) mountFlags(sb bool) uintptr {
	var f uintptr
	for _, flag := range []uintptr{unix.MS_RDONLY, unix.MS_NOSUID, unix.MS_NODEV, unix.MS_NOEXEC, unix.MS_NODIRATIME, unix.MS_NOSYMFOLLOW} {
		if w.r.IntN(4) == 0 {
			f |= flag
		}
	}
	f |= []uintptr{0, unix.MS_NOATIME, unix.MS_STRICTATIME, unix.MS_RELATIME}[w.r.IntN(4)]
	if sb {
		for _, flag := range []uintptr{unix.MS_SYNCHRONOUS, unix.MS_DIRSYNC, unix.MS_LAZYTIME} {
			if w.r.IntN(5) == 0 {
				f |= flag
			}
		}
	}
	return f
}

func (w *mountWorld) tmpfsData() string {
	opts := []string{fmt.Sprintf("size=%dk", 64+w.r.IntN(4096))}
	if w.r.IntN(2) == 0 {
		opts = append(opts, fmt.Sprintf("mode=%o", 0o700+w.r.IntN(0o100)))
	}
	if w.r.IntN(3) == 0 {
		opts = append(opts, fmt.Sprintf("nr_inodes=%d", 100+w.r.IntN(1000)))
	}
	return strings.Join(opts, ",")
}

// did records the outcome of one mount(2): refused ones are fine, the
// kernel's two tables must agree whatever it did.
func (w *mountWorld) did(err error) bool {
	if err != nil {
		w.refused++
		return false
	}
	w.done++
	return true
}

// step makes one random change and says what it was.
func (w *mountWorld) step() string {
	ops := []struct {
		weight int
		name   string
		do     func() string
	}{
		{5, "tmpfs", w.opTmpfs},
		{4, "bind", w.opBind},
		{1, "unlinked file bind", w.opUnlinkedFile},
		{1, "unlinked dir bind", w.opUnlinkedDir},
		{1, "ext4", w.opExt4},
		{1, "fuse", w.opFUSE},
		{1, "idmapped bind", w.opIdmapped},
		{5, "propagation", w.opPropagation},
		{2, "slave and shared", w.opSlaveShared},
		{2, "remount bind", w.opRemountBind},
		{2, "remount", w.opRemount},
		{2, "overmount", w.opOvermount},
		{1, "move", w.opMove},
		{3, "umount", w.opUmount},
		{3, "nested", w.opNested},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	n := w.r.IntN(total)
	for _, o := range ops {
		if n -= o.weight; n < 0 {
			return o.name + ": " + o.do()
		}
	}
	panic("unreachable")
}

func (w *mountWorld) opTmpfs() string {
	dir := w.newDir()
	src := "tmp" + w.name()
	if w.did(unix.Mount(src, dir, "tmpfs", w.mountFlags(true), w.tmpfsData())) {
		w.mounts = append(w.mounts, mountRec{dir, "tmpfs"})
	}
	return fmt.Sprintf("%q", dir)
}

func (w *mountWorld) opBind() string {
	src := w.dirs[w.r.IntN(len(w.dirs))]
	if m, ok := w.someMount(); ok && m.kind != "fuse" && m.kind != "file" && w.r.IntN(2) == 0 {
		src = m.path
	}
	if w.underFUSE(src) {
		return "skipped"
	}
	flags := uintptr(unix.MS_BIND)
	if w.r.IntN(2) == 0 {
		flags |= unix.MS_REC
	}
	dir := w.newDir()
	if w.did(unix.Mount(src, dir, "", flags, "")) {
		w.mounts = append(w.mounts, mountRec{dir, "bind"})
	}
	return fmt.Sprintf("%q on %q rec=%v", src, dir, flags&unix.MS_REC != 0)
}

// opUnlinkedFile binds a file and removes it: the root is "//deleted".
func (w *mountWorld) opUnlinkedFile() string {
	src, dst := filepath.Join(w.base, w.name()), filepath.Join(w.base, w.name())
	require.NoError(w.t, os.WriteFile(src, nil, 0o600))
	require.NoError(w.t, os.WriteFile(dst, nil, 0o600))
	if w.did(unix.Mount(src, dst, "", unix.MS_BIND, "")) {
		w.mounts = append(w.mounts, mountRec{dst, "file"})
	}
	require.NoError(w.t, os.Remove(src))
	return fmt.Sprintf("%q on %q", src, dst)
}

// opUnlinkedDir binds an empty directory and removes it.
func (w *mountWorld) opUnlinkedDir() string {
	src := filepath.Join(w.base, w.name())
	require.NoError(w.t, os.Mkdir(src, 0o755))
	dir := w.newDir()
	if w.did(unix.Mount(src, dir, "", unix.MS_BIND, "")) {
		w.mounts = append(w.mounts, mountRec{dir, "bind"})
	}
	require.NoError(w.t, os.Remove(src))
	return fmt.Sprintf("%q on %q", src, dir)
}

func (w *mountWorld) opExt4() string {
	if w.ext4 == "" {
		w.ext4 = mountns.Ext4(w.t, 16)
	}
	data := []string{"", "errors=remount-ro", "commit=17", "nodelalloc", "noauto_da_alloc", "errors=remount-ro,commit=9"}[w.r.IntN(6)]
	dir := w.newDir()
	if w.did(unix.Mount(w.ext4, dir, "ext4", w.mountFlags(true), data)) {
		w.mounts = append(w.mounts, mountRec{dir, "ext4"})
	}
	return fmt.Sprintf("%q on %q %q", w.ext4, dir, data)
}

// opFUSE mounts a FUSE filesystem (type fuse.volrecon-test: a subtype)
// whose daemon never answers: nothing ever looks inside it.
func (w *mountWorld) opFUSE() string {
	if w.fuse >= 2 {
		return "skipped"
	}
	w.fuse++
	dir := w.newDir()
	mountns.FUSE(w.t, dir)
	w.done++
	w.mounts = append(w.mounts, mountRec{dir, "fuse"})
	return fmt.Sprintf("%q", dir)
}

// opIdmapped binds a tmpfs made here through a user namespace's mapping
// (open_tree, mount_setattr, move_mount): "idmapped".
func (w *mountWorld) opIdmapped() string {
	m, ok := w.someMount()
	if !ok || m.kind != "tmpfs" {
		return "skipped"
	}
	userns := w.userNamespace()
	tree, err := unix.OpenTree(unix.AT_FDCWD, m.path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if !w.did(err) {
		return "open_tree refused"
	}
	defer unix.Close(tree)
	ns, err := unix.Open(userns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(w.t, err)
	defer unix.Close(ns)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns)}
	if !w.did(unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr)) {
		return "mount_setattr refused"
	}
	dir := w.newDir()
	if w.did(unix.MoveMount(tree, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH)) {
		w.mounts = append(w.mounts, mountRec{dir, "bind"})
	}
	return fmt.Sprintf("%q on %q", m.path, dir)
}

// userNamespace is a user namespace that maps IDs 0-65535 to 100000 on,
// held by a sleeping process.
func (w *mountWorld) userNamespace() string {
	if w.userns != "" {
		return w.userns
	}
	cmd := exec.Command("sleep", "3600")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000, Size: 65536}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000, Size: 65536}},
	}
	require.NoError(w.t, cmd.Start())
	w.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	w.userns = fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid)
	return w.userns
}

func (w *mountWorld) opPropagation() string {
	m, ok := w.someMount()
	if !ok {
		return "skipped"
	}
	kind := []uintptr{unix.MS_SHARED, unix.MS_SLAVE, unix.MS_PRIVATE, unix.MS_UNBINDABLE, unix.MS_SHARED, unix.MS_SLAVE}[w.r.IntN(6)]
	if w.r.IntN(3) == 0 {
		kind |= unix.MS_REC
	}
	w.did(unix.Mount("", m.path, "", kind, ""))
	return fmt.Sprintf("%q %#x", m.path, kind)
}

// opSlaveShared makes a mount a slave of its peers, then shared: a peer
// group of its own that receives from the one it left, a chain along
// which propagate_from appears in the nested namespace.
func (w *mountWorld) opSlaveShared() string {
	m, ok := w.someMount()
	if !ok {
		return "skipped"
	}
	if w.did(unix.Mount("", m.path, "", unix.MS_SLAVE, "")) {
		w.did(unix.Mount("", m.path, "", unix.MS_SHARED, ""))
	}
	return fmt.Sprintf("%q", m.path)
}

func (w *mountWorld) opRemountBind() string {
	m, ok := w.someMount()
	if !ok {
		return "skipped"
	}
	flags := unix.MS_REMOUNT | unix.MS_BIND | w.mountFlags(false)
	w.did(unix.Mount("", m.path, "", flags, ""))
	return fmt.Sprintf("%q %#x", m.path, flags)
}

// opRemount remounts a tmpfs's or an ext4's superblock.
func (w *mountWorld) opRemount() string {
	m, ok := w.someMount()
	if !ok || m.kind != "tmpfs" && m.kind != "ext4" {
		return "skipped"
	}
	data := ""
	if m.kind == "tmpfs" {
		data = fmt.Sprintf("size=%dk", 64+w.r.IntN(4096))
	} else if w.r.IntN(2) == 0 {
		data = fmt.Sprintf("commit=%d", 1+w.r.IntN(60))
	}
	flags := unix.MS_REMOUNT | w.mountFlags(true)
	w.did(unix.Mount("", m.path, "", flags, data))
	return fmt.Sprintf("%q %#x %q", m.path, flags, data)
}

// opOvermount stacks a tmpfs on a mount made.
func (w *mountWorld) opOvermount() string {
	m, ok := w.someMount()
	if !ok || m.kind == "fuse" || m.kind == "file" {
		return "skipped"
	}
	if w.did(unix.Mount("over"+w.name(), m.path, "tmpfs", w.mountFlags(true), w.tmpfsData())) {
		w.mounts = append(w.mounts, mountRec{m.path, "tmpfs"})
	}
	return fmt.Sprintf("%q", m.path)
}

func (w *mountWorld) opMove() string {
	m, ok := w.someMount()
	if !ok || m.kind == "fuse" || m.kind == "file" {
		return "skipped"
	}
	dir := w.newDir()
	if w.did(unix.Mount(m.path, dir, "", unix.MS_MOVE, "")) {
		w.rename(m.path, dir)
	}
	return fmt.Sprintf("%q to %q", m.path, dir)
}

func (w *mountWorld) opUmount() string {
	if len(w.mounts) == 0 {
		return "skipped"
	}
	i := w.r.IntN(len(w.mounts))
	m := w.mounts[i]
	if w.did(unix.Unmount(m.path, unix.MNT_DETACH)) {
		w.forget(m.path)
	}
	return fmt.Sprintf("%q", m.path)
}

// opNested makes a change in the nested namespace, or makes it anew: a
// copy of the test's, where the mounts made are peers or slaves of the
// test's.
func (w *mountWorld) opNested() string {
	if w.nested == nil || w.r.IntN(8) == 0 {
		if w.nested != nil {
			w.nested.stop()
		}
		w.nested = startHelper(w.t, true)
		return "made"
	}
	m, ok := w.someMount()
	if !ok {
		return "skipped"
	}
	var cmd helperCmd
	switch w.r.IntN(4) {
	case 0:
		cmd = helperCmd{Op: "mount", Path: filepath.Join(m.path, w.name()), Source: "nested", FSType: "tmpfs", Data: "size=64k"}
		if m.kind == "fuse" || m.kind == "file" {
			return "skipped"
		}
	case 1:
		cmd = helperCmd{Op: "umount", Path: m.path}
	default:
		kind := []uintptr{unix.MS_SHARED, unix.MS_SLAVE, unix.MS_SLAVE, unix.MS_PRIVATE, unix.MS_SLAVE | unix.MS_REC}[w.r.IntN(5)]
		cmd = helperCmd{Op: "mount", Path: m.path, Flags: kind}
	}
	w.did(errorOf(w.nested.do(cmd)))
	return fmt.Sprintf("%s %q %#x", cmd.Op, cmd.Path, cmd.Flags)
}

func errorOf(r helperReply) error {
	if r.Err != "" {
		return errors.New(r.Err)
	}
	return nil
}

// underFUSE reports whether p lies in a FUSE mount made (nothing there may
// be looked up: its daemon never answers).
func (w *mountWorld) underFUSE(p string) bool {
	for _, m := range w.mounts {
		if m.kind == "fuse" && (p == m.path || strings.HasPrefix(p, m.path+"/")) {
			return true
		}
	}
	return false
}

// rename records a move of the mount at from to to.
func (w *mountWorld) rename(from, to string) {
	move := func(p string) string {
		if p == from {
			return to
		}
		if rest, ok := strings.CutPrefix(p, from+"/"); ok {
			return to + "/" + rest
		}
		return p
	}
	for i := range w.mounts {
		w.mounts[i].path = move(w.mounts[i].path)
	}
	for i := range w.dirs {
		w.dirs[i] = move(w.dirs[i])
	}
	w.dirs = append(w.dirs, from)
}

// forget records an unmount (MNT_DETACH) at p: everything below goes with
// it, and the mount under it, if any, is on top again.
func (w *mountWorld) forget(p string) {
	for i := len(w.mounts) - 1; i >= 0; i-- {
		if w.mounts[i].path == p {
			w.mounts = slices.Delete(w.mounts, i, i+1)
			break
		}
	}
	below := func(q string) bool { return strings.HasPrefix(q, p+"/") }
	w.mounts = slices.DeleteFunc(w.mounts, func(m mountRec) bool { return below(m.path) })
	w.dirs = slices.DeleteFunc(w.dirs, below)
}

// compare checks every reading of every namespace against mountinfo.
func (w *mountWorld) compare(what string) {
	t := w.t
	ctx := t.Context()
	want, err := ReadFile(ctx, DefaultPath, 0)
	require.NoError(t, err, what)
	got, err := ReadStatmount(ctx, StatmountRead{Watch: w.watch})
	require.NoError(t, err, what)
	require.Empty(t, diffTables(got, want), "%s: own namespace\n%s", what, formatTable(want))
	assert.Equal(t, MethodStatmount, got.Method())
	w.count("own", want)

	scope := NewScope(w.dirs[w.r.IntN(len(w.dirs))])
	want, err = ReadFileScoped(ctx, DefaultPath, 0, scope)
	require.NoError(t, err, what)
	got, err = ReadStatmount(ctx, StatmountRead{Scope: scope}) // not watched: until two readings agree
	require.NoError(t, err, what)
	require.Empty(t, diffTables(got, want), "%s: own namespace, scoped\n%s", what, formatTable(want))

	if w.nested == nil {
		return
	}
	r := w.nested.do(helperCmd{Op: "compare"})
	require.Empty(t, r.Err, what)
	require.Empty(t, r.Diff, "%s: nested namespace read from inside\n%s", what, r.Mountinfo)
	w.compareForeign(what)
}

// compareForeign reads the nested namespace from outside, by its ID: the
// table is mountinfo's, or unavailable exactly when a slave's master has
// no peer there (the kernel cannot tell its propagate_from).
func (w *mountWorld) compareForeign(what string) {
	t := w.t
	ctx := t.Context()
	want, err := ReadFile(ctx, w.nested.mountinfo(), 0)
	require.NoError(t, err, what)
	got, err := ReadStatmount(ctx, StatmountRead{Namespace: w.nested.namespaceID()})
	if unknowablePropagateFrom(want) {
		require.ErrorIs(t, err, ErrStatmountUnavailable, "%s: nested namespace read by ID\n%s", what, formatTable(want))
		w.seen["by ID: unavailable"]++
	} else {
		require.NoError(t, err, what)
		require.Empty(t, diffTables(got, want), "%s: nested namespace read by ID\n%s", what, formatTable(want))
		w.seen["by ID: read"]++
	}
	w.count("nested", want)
	src, err := Source{Path: w.nested.mountinfo(), Method: MethodStatmount}.ReadScoped(ctx, nil)
	require.NoError(t, err, what)
	require.Empty(t, diffTables(src, want), "%s: nested namespace through a Source\n%s", what, formatTable(want))
	if unknowablePropagateFrom(want) {
		assert.Equal(t, MethodMountinfo, src.Method(), what)
		assert.ErrorIs(t, src.StatmountError(), ErrStatmountUnavailable, what)
	} else {
		assert.Equal(t, MethodStatmount, src.Method(), what)
	}
}

// count records the features of a table compared.
func (w *mountWorld) count(ns string, t *Table) {
	features := map[string]bool{}
	for _, m := range t.Mounts() {
		for _, f := range m.OptionalFields {
			tag, _, _ := strings.Cut(f, ":")
			features[tag] = true
		}
		for _, o := range strings.Split(m.Options+","+m.SuperOptions, ",") {
			switch o {
			case "ro", "nosuid", "nodev", "noexec", "noatime", "nodiratime", "nosymfollow", "idmapped", "sync", "dirsync", "lazytime":
				features[o] = true
			}
		}
		features["deleted"] = features["deleted"] || m.Deleted
		features["escaped name"] = features["escaped name"] || strings.ContainsAny(m.MountPoint, " \t\n\\")
		features[m.FSType] = features[m.FSType] || m.FSType == "ext4" || strings.HasPrefix(m.FSType, "fuse.")
	}
	for f, ok := range features {
		if ok {
			w.seen[ns+": "+f]++
		}
	}
}

// unknowablePropagateFrom reports whether a table holds a slave whose
// master has no peer in it.
func unknowablePropagateFrom(t *Table) bool {
	shared := map[int]bool{}
	for _, m := range t.Mounts() {
		if p := m.Propagation(); p.Shared != 0 {
			shared[p.Shared] = true
		}
	}
	for _, m := range t.Mounts() {
		if p := m.Propagation(); p.Master != 0 && !shared[p.Master] {
			return true
		}
	}
	return false
}
