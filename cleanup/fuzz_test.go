package cleanup_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// FuzzScanTree builds a small kubelet root and a mount table from the fuzz
// input (see fzProgram), scans it with a 1-second deadline and an
// active-pod list that names half of the pod UIDs, and plans a cleanup with
// and without unmounting. It checks that:
//
//   - Scan neither panics nor hangs: it returns within its deadline (plus
//     scheduling slack);
//   - the mount table is consistent exactly when it parses, and pod
//     statuses follow the active-pod list;
//   - every symlink or other non-directory where the kubelet's layout has a
//     directory, every directory where a block map file belongs, every
//     unexpected entry of a CSI staging or block dir and every pods/ entry
//     that is not a pod UID dir shows up as an UnexpectedEntry finding;
//   - no Rmdir, Unlink or RemoveVolumeData action of either plan lies
//     outside the pods dir, belongs to a pod that is not Orphaned or has an
//     Uncertain volume, or lies at, below or above a mount point of the
//     table under the pods dir (with unmounting, unless an earlier Unmount
//     action removes that mount); with a torn table there is none at all;
//   - Unmount actions appear only when allowed, only under orphaned pod dirs;
//   - with probing (a fake stat), every broken mount has a CorruptedMount
//     finding, every hung one a HungMount finding, and a volume whose
//     checked path hung is Uncertain (so its pod is never cleaned).
//
// The plan is never executed. Seeds are in testdata/fuzz/FuzzScanTree.
func FuzzScanTree(f *testing.F) {
	for _, seed := range fzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, program []byte) {
		base := fzTempDir(t)
		n := fzBuildNode(t, base, program)
		fzCheckScan(t, n)
	})
}

// fzTempDir returns a new temp dir, on tmpfs (/dev/shm) when there is one:
// the target makes and removes a tree per input, which on a disk
// filesystem costs more than the scan itself.
func fzTempDir(tb testing.TB) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "volrecon-fuzz-"); err == nil {
			tb.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return tb.TempDir()
}

const (
	fzRoot      = "/var/lib/kubelet"
	fzPodsDir   = fzRoot + "/pods"
	fzDeadline  = time.Second
	fzHangSlack = 2 * time.Second // on top of the deadline, for a loaded machine
	fzMaxOps    = 48
)

// Vocabularies the program picks from. Pod names: four UIDs (the first two
// are active, as is an upper-case spelling of the first), and names that
// are not pod UIDs.
var (
	fzActive = []string{"0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", "2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c"}
	fzPods   = []struct {
		name  string
		isUID bool
	}{
		{fzActive[0], true},
		{fzActive[1], true},
		{"7f8e9d0c-1b2a-4c3d-8e5f-6a7b8c9d0e1f", true},
		{"d41d8cd98f00b204e9800998ecf8427e", true}, // a static pod
		{"0B6A3C7E-1F2D-4C1A-9E7B-3D5F6A7B8C91", true},
		{"not-a-uid", false},
		{"2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5", false},
		{"7f8e9d0c-1b2a-4c3d-8e5f-6a7b8c9d0e1fa", false},
	}
	fzPlugins = []string{"kubernetes.io~csi", "kubernetes.io~empty-dir", "kubernetes.io~secret",
		"kubernetes.io~configmap", "vendor~drv", "kubernetes.io~nfs"}
	fzVols    = []string{"pvc-1", "pvc-2", "cache", "sp ace", `back\slash`}
	fzDrivers = []string{"ebs.csi.aws.com", "drv.example.com"}
	fzHandles = []string{"vol-1", "vol-2"}
	fzHashes  = []string{podsdir.StagingHash(fzHandles[0]), podsdir.StagingHash(fzHandles[1]), "0000"}
	fzFiles   = []string{"data", "mount", "vol_data.json", "ready", "x"}
	fzOthers  = []string{"etc-hosts", "containers", "plugins", "x"}
	fzCtrs    = []string{"app", "sidecar"}
	fzIdxs    = []string{"0", "1"}
	fzFSTypes = []string{"tmpfs", "ext4", "nfs4", "fuse.sshfs", "hugetlbfs", "overlay"}
	fzSources = []string{"tmpfs", "/dev/nvme1n1", "srv:/exp dir"}

	// Paths relative to the kubelet root; {x} is filled from vocabulary x.
	fzTemplates = []string{
		"pods",
		"pods/{pod}",
		"pods/{pod}/volumes",
		"pods/{pod}/volumes/{plugin}",
		"pods/{pod}/volumes/{plugin}/{vol}",
		"pods/{pod}/volumes/{plugin}/{vol}/mount",
		"pods/{pod}/volumes/{plugin}/{vol}/vol_data.json",
		"pods/{pod}/volumes/{plugin}/{vol}/mount/{file}",
		"pods/{pod}/volumes/{plugin}/{vol}/{file}",
		"pods/{pod}/volumeDevices",
		"pods/{pod}/volumeDevices/{plugin}",
		"pods/{pod}/volumeDevices/{plugin}/{vol}",
		"pods/{pod}/volume-subpaths",
		"pods/{pod}/volume-subpaths/{vol}",
		"pods/{pod}/volume-subpaths/{vol}/{ctr}",
		"pods/{pod}/volume-subpaths/{vol}/{ctr}/{idx}",
		"pods/{pod}/{other}",
		"pods/{pod}/{other}/{file}",
		"plugins",
		"plugins/kubernetes.io",
		"plugins/kubernetes.io/csi",
		"plugins/kubernetes.io/csi/{driver}",
		"plugins/kubernetes.io/csi/{driver}/{hash}",
		"plugins/kubernetes.io/csi/{driver}/{hash}/globalmount",
		"plugins/kubernetes.io/csi/{driver}/{hash}/vol_data.json",
		"plugins/kubernetes.io/csi/{driver}/{hash}/{file}",
		"plugins/kubernetes.io/csi/pv/{vol}",
		"plugins/kubernetes.io/csi/pv/{vol}/globalmount",
		"plugins/kubernetes.io/csi/pv/{vol}/vol_data.json",
		"plugins/kubernetes.io/csi/volumeDevices/staging/{vol}",
		"plugins/kubernetes.io/csi/volumeDevices/{vol}/data/vol_data.json",
		"plugins/kubernetes.io/csi/volumeDevices/{vol}/dev/{pod}",
		"plugins/kubernetes.io/csi/volumeDevices/publish/{vol}/{pod}",
		"plugins/kubernetes.io/csi/volumeDevices/{vol}/{file}",
	}
)

// Op codes of a tree program.
const (
	fzDir = iota
	fzFile
	fzLinkIn
	fzLinkOut
	fzFIFO
	fzMount
	fzMountSpecial
	fzMalformed
	fzProbe
	fzNumOps
)

// fzProgram reads the fuzz input byte by byte; past its end every byte
// is 0. The program is a sequence of operations, each an op code byte and
// its arguments:
//
//	fzDir PATH                    a directory (parents are created as dirs)
//	fzFile PATH CONTENT           a regular file; CONTENT is a byte choosing a
//	                              vol_data.json variant or N and N raw bytes
//	fzLinkIn PATH KIND PATH2      a symlink to a path of the tree (absolute,
//	                              relative or ".")
//	fzLinkOut PATH KIND           a symlink out of the tree (dangling, to a
//	                              dir outside the host root, to /proc/self/root)
//	fzFIFO PATH                   a FIFO
//	fzMount NODE FIELDS           a mount-table line at a dir or file made earlier
//	fzMountSpecial WHICH FIELDS   a line at the kubelet root, the pods dir or elsewhere
//	fzMalformed WHICH             a malformed line (fixed or raw bytes)
//	fzProbe MODE                  probe mounted paths with a fake stat that,
//	                              by path and MODE, succeeds, fails with ENOTCONN,
//	                              ESTALE or EACCES, or hangs
//
// PATH is a template byte and one byte per placeholder. A node whose
// parent is not a directory, or whose path exists, is skipped; nothing is
// ever created through a symlink.
type fzProgram struct {
	data []byte
	pos  int
}

func (p *fzProgram) next() byte {
	if p.pos >= len(p.data) {
		return 0
	}
	b := p.data[p.pos]
	p.pos++
	return b
}

func (p *fzProgram) done() bool { return p.pos >= len(p.data) }

func fzPick[T any](p *fzProgram, vocab []T) T { return vocab[int(p.next())%len(vocab)] }

// path reads a template and its placeholders; it returns the path relative
// to the kubelet root.
func (p *fzProgram) path() string {
	tmpl := fzPick(p, fzTemplates)
	parts := strings.Split(tmpl, "/")
	for i, c := range parts {
		switch c {
		case "{pod}":
			parts[i] = fzPick(p, fzPods).name
		case "{plugin}":
			parts[i] = fzPick(p, fzPlugins)
		case "{vol}":
			parts[i] = fzPick(p, fzVols)
		case "{driver}":
			parts[i] = fzPick(p, fzDrivers)
		case "{hash}":
			parts[i] = fzPick(p, fzHashes)
		case "{file}":
			parts[i] = fzPick(p, fzFiles)
		case "{other}":
			parts[i] = fzPick(p, fzOthers)
		case "{ctr}":
			parts[i] = fzPick(p, fzCtrs)
		case "{idx}":
			parts[i] = fzPick(p, fzIdxs)
		}
	}
	return strings.Join(parts, "/")
}

func (p *fzProgram) content() []byte {
	driver, handle := fzPick(p, fzDrivers), fzPick(p, fzHandles)
	switch c := p.next(); c % 8 {
	case 0:
		return fmt.Appendf(nil, `{"driverName":%q,"volumeHandle":%q}`, driver, handle)
	case 1:
		return fmt.Appendf(nil, `{"driverName":%q,"volumeHandle":%q,"specVolID":"pvc-1","nodeName":"n","volumeLifecycleMode":"Persistent"}`, driver, handle)
	case 2:
		return nil
	case 3:
		return []byte(`{"driverName":"` + driver)
	case 4:
		return []byte(`[]`)
	case 5:
		return fmt.Appendf(nil, `{"driverName":%q,"volumeHandle":%q,"seLinuxMountContext":"system_u:object_r:container_file_t:s0:c1,c2"}`, driver, handle)
	default:
		n := int(c) % 48
		out := make([]byte, n)
		for i := range out {
			out[i] = p.next()
		}
		return out
	}
}

// fzNode is what fzBuildNode made.
type fzNode struct {
	base, hostRoot string
	mountinfo      []byte
	made           []string // host paths of the dirs and files made, in order
	probe          bool     // scan with Options.Probe and the fake prober
	probeMode      byte
}

// fzBuildNode runs the program under base/host and writes the mount table to base/mountinfo.
func fzBuildNode(t *testing.T, base string, program []byte) *fzNode {
	t.Helper()
	n := &fzNode{base: base, hostRoot: filepath.Join(base, "host")}
	outside := filepath.Join(base, "outside")
	for _, dir := range []string{filepath.Join(n.hostRoot, fzRoot), outside} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "canary"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := []string{mountscan.FormatLine(mountscan.Mount{ID: 1, Dev: mountscan.DevID{Major: 259, Minor: 1}, Root: "/", MountPoint: "/",
		Options: "rw,relatime", OptionalFields: []string{"shared:1"}, FSType: "ext4", Source: "/dev/nvme0n1p1", SuperOptions: "rw"})}
	p := &fzProgram{data: program}
	for op := 0; op < fzMaxOps && !p.done(); op++ {
		switch code := p.next() % fzNumOps; code {
		case fzDir, fzFile, fzLinkIn, fzLinkOut, fzFIFO:
			rel := p.path()
			var arg []byte
			var target string
			switch code {
			case fzFile:
				arg = p.content()
			case fzLinkIn:
				switch k, other := p.next()%3, p.path(); k {
				case 0:
					target = filepath.Join(fzRoot, other)
				case 1:
					target = strings.Repeat("../", strings.Count(rel, "/")) + other
				default:
					target = "."
				}
			case fzLinkOut:
				switch p.next() % 4 {
				case 0:
					target = "/nonexistent/dir"
				case 1: // the real dir outside the host root, relative: it escapes the host root
					target = strings.Repeat("../", 3+strings.Count(rel, "/")+1) + "outside"
				case 2: // the same, absolute: a host path, so it does not exist under the host root
					target = outside
				default:
					target = "/proc/self/root"
				}
			}
			if hp, ok := n.create(t, rel, code, arg, target); ok && (code == fzDir || code == fzFile) {
				n.made = append(n.made, hp)
			}
		case fzMount:
			if len(n.made) == 0 {
				p.next()
				continue
			}
			hp := n.made[int(p.next())%len(n.made)]
			lines = append(lines, fzMountLine(p, len(lines), strings.TrimPrefix(hp, n.hostRoot)))
		case fzMountSpecial:
			mp := fzPick(p, []string{fzRoot, fzPodsDir, "/mnt/elsewhere", fzRoot + "/plugins"})
			lines = append(lines, fzMountLine(p, len(lines), mp))
		case fzProbe:
			n.probe, n.probeMode = true, p.next()
		case fzMalformed:
			switch p.next() % 3 {
			case 0:
				lines = append(lines, "36 35 x:0 / /var/lib/kubelet/pods rw - tmpfs tmpfs rw")
			case 1:
				lines = append(lines, "300 1 259:3 / /var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91/volu")
			default:
				raw := make([]byte, int(p.next())%32)
				for i := range raw {
					raw[i] = p.next()
				}
				lines = append(lines, strings.ReplaceAll(string(raw), "\n", " "))
			}
		}
	}
	n.mountinfo = []byte(strings.Join(lines, "\n") + "\n")
	if err := os.WriteFile(filepath.Join(base, "mountinfo"), n.mountinfo, 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// fzMountLine writes an entry at host path mp with fields from the program.
func fzMountLine(p *fzProgram, i int, mp string) string {
	m := mountscan.Mount{ID: 100 + i, ParentID: 1, MountPoint: mp, Root: "/", Options: "rw,relatime", SuperOptions: "rw"}
	// b: bits 0-1 the device (a new one, one of four disks, the root's),
	// bits 2-3 which disk, bit 6 a root other than "/", bit 7 a peer group.
	b := p.next()
	switch b & 3 {
	case 0:
		m.Dev = mountscan.DevID{Major: 0, Minor: uint32(50 + i)}
	case 1:
		m.Dev = mountscan.DevID{Major: 259, Minor: uint32(b>>2) & 3}
	default:
		m.Dev = mountscan.DevID{Major: 259, Minor: 1} // the root's filesystem
	}
	if b&0x40 != 0 {
		m.Root = "/sub dir"
	}
	if b&0x80 != 0 {
		m.OptionalFields = []string{fmt.Sprintf("shared:%d", 200+i)}
	}
	m.FSType = fzPick(p, fzFSTypes)
	m.Source = fzPick(p, fzSources)
	if p.next()%4 == 0 {
		m.SuperOptions = `rw,context="system_u:object_r:container_file_t:s0:c3,c4"`
	}
	return mountscan.FormatLine(m)
}

// create makes one node at rel (under the kubelet root) without ever going
// through a symlink; it reports the host path and whether it made it.
func (n *fzNode) create(t *testing.T, rel string, code byte, content []byte, target string) (string, bool) {
	t.Helper()
	dir := filepath.Join(n.hostRoot, fzRoot)
	parts := strings.Split(rel, "/")
	for _, c := range parts[:len(parts)-1] {
		dir = filepath.Join(dir, c)
		fi, err := os.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		case err != nil:
			t.Fatal(err)
		case !fi.IsDir():
			return "", false
		}
	}
	hp := filepath.Join(dir, parts[len(parts)-1])
	if _, err := os.Lstat(hp); !errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	var err error
	switch code {
	case fzDir:
		err = os.Mkdir(hp, 0o755)
	case fzFile:
		err = os.WriteFile(hp, content, 0o644)
	case fzLinkIn, fzLinkOut:
		err = os.Symlink(target, hp)
	case fzFIFO:
		err = syscall.Mkfifo(hp, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return hp, true
}

// errFzHung marks a path whose fake stat hung.
var errFzHung = errors.New("hung")

// fzProber is a fake stat for the probes: by a hash of the path and the
// mode it succeeds, fails or hangs until the scan's context ends.
type fzProber struct {
	hostRoot string
	mode     byte
	mu       sync.Mutex
	outcomes map[string]error // by host path without the host root
}

func (p *fzProber) stat(ctx context.Context, hostPath string) error {
	rel := strings.TrimPrefix(hostPath, p.hostRoot)
	h := fnv.New32a()
	h.Write([]byte(rel))
	var err error
	switch (h.Sum32() + uint32(p.mode)) % 5 {
	case 1:
		err = syscall.ENOTCONN
	case 2:
		err = syscall.ESTALE
	case 3:
		err = syscall.EACCES
	case 4:
		err = errFzHung
	}
	p.mu.Lock()
	p.outcomes[rel] = err
	p.mu.Unlock()
	if err == errFzHung {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

// check: every broken mount has a CorruptedMount finding, every hung one a
// HungMount finding, and a volume whose checked path hung is Uncertain.
func (p *fzProber) check(t *testing.T, st *reconstruct.State) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	found := map[reconstruct.FindingKind]map[string]bool{}
	for _, f := range st.Findings {
		if found[f.Kind] == nil {
			found[f.Kind] = map[string]bool{}
		}
		found[f.Kind][f.Path] = true
	}
	for rel, err := range p.outcomes {
		switch {
		case err == errFzHung && !found[reconstruct.HungMount][rel]:
			t.Fatalf("the probe of %s hung, but there is no HungMount finding; findings:\n%s", rel, fzFindings(st))
		case (err == syscall.ENOTCONN || err == syscall.ESTALE) && !found[reconstruct.CorruptedMount][rel]:
			t.Fatalf("the probe of %s failed with %v, but there is no CorruptedMount finding; findings:\n%s", rel, err, fzFindings(st))
		}
	}
	for _, v := range st.Volumes {
		if p.outcomes[v.CheckedPath] == errFzHung && v.State != reconstruct.Uncertain {
			t.Fatalf("volume %s of pod %s: the probe of %s hung, but it is %s", v.Name, v.PodUID, v.CheckedPath, v.State)
		}
	}
}

type fzScanResult struct {
	st    *reconstruct.State
	err   error
	panic string
}

// node is where the cleanup reads the fuzzed node.
func (n *fzNode) node() reconstruct.Node {
	return reconstruct.Node{HostRoot: n.hostRoot, MountTable: mountscan.Source{Path: filepath.Join(n.base, "mountinfo")}}
}

func fzCheckScan(t *testing.T, n *fzNode) {
	ctx, cancel := context.WithTimeout(context.Background(), fzDeadline)
	defer cancel()
	prober := &fzProber{hostRoot: n.hostRoot, mode: n.probeMode, outcomes: map[string]error{}}
	opts := reconstruct.Options{Node: reconstruct.Node{HostRoot: n.hostRoot, MountTable: mountscan.Source{Path: filepath.Join(n.base, "mountinfo")}}, Probe: n.probe, Prober: prober.stat, ActivePods: reconstruct.PodList(fzActive), ProbeTimeout: 20 * time.Millisecond, AssumeOrphansDead: true}
	done := make(chan fzScanResult, 1)
	start := time.Now()
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fzScanResult{panic: fmt.Sprintf("%v\n%s", r, debug.Stack())}
			}
		}()
		st, err := reconstruct.Scan(ctx, opts)
		done <- fzScanResult{st: st, err: err}
	}()
	var r fzScanResult
	select {
	case r = <-done:
	case <-time.After(fzDeadline + fzHangSlack):
		t.Fatalf("Scan hangs: no return %v after its %v deadline\nmountinfo:\n%s", fzHangSlack, fzDeadline, n.mountinfo)
	}
	switch {
	case r.panic != "":
		t.Fatalf("Scan panicked: %s", r.panic)
	case r.err != nil && ctx.Err() != nil:
		t.Logf("Scan returned %v after %v, at its deadline: nothing to check", r.err, time.Since(start))
		return
	case r.err != nil && !(errors.Is(r.err, reconstruct.ErrMountTable) && r.st != nil && !r.st.MountTable.Consistent):
		t.Fatalf("Scan: %v", r.err)
	case r.err == nil && !r.st.MountTable.Consistent:
		t.Fatalf("Scan: the mount table was not read (%s), but no error says it", r.st.MountTable.Error)
	}
	st := r.st
	if testing.Verbose() {
		fzLog(t, n, st)
	}

	table, tableErr := mountscan.ParseBytes(n.mountinfo)
	consistent := tableErr == nil
	if st.MountTable.Consistent != consistent {
		t.Fatalf("mount table consistent %v, but it parses with error %v", st.MountTable.Consistent, tableErr)
	}
	fzCheckStatuses(t, st)
	fzCheckProblems(t, n, st)
	prober.check(t, st)
	var mountPoints []string
	if consistent {
		for _, m := range table.Mounts() {
			mountPoints = append(mountPoints, m.MountPoint)
		}
	}
	for _, unmount := range []bool{false, true} {
		plan := cleanup.Plan(ctx, st, cleanup.Options{Node: n.node(), Unmount: unmount})
		fzCheckPlan(t, st, plan, unmount, consistent, mountPoints)
	}
	// Symlinks lead out of the host root to this dir: nothing may touch it.
	if es, err := os.ReadDir(filepath.Join(n.base, "outside")); err != nil || len(es) != 1 || es[0].Name() != "canary" {
		t.Fatalf("the dir outside the host root changed: %v, %v", es, err)
	}
}

func fzCheckStatuses(t *testing.T, st *reconstruct.State) {
	t.Helper()
	for _, p := range st.Pods {
		want := reconstruct.PodOrphaned
		if slices.Contains(fzActive, strings.ToLower(p.UID)) {
			want = reconstruct.PodActive
		}
		// A path of the pod the scan could not read (or may not enter: a
		// FUSE or network mount where the layout has none) makes it Unknown;
		// a probe that hung does not.
		if slices.ContainsFunc(st.Findings, func(f reconstruct.Finding) bool { return fzUnread(f) && f.PodUID == p.UID }) {
			want = reconstruct.PodUnknown
		}
		if p.Status != want {
			t.Fatalf("pod %s is %s, want %s", p.UID, p.Status, want)
		}
	}
}

// fzCheckProblems walks the tree itself (never following a symlink) and
// checks that every entry that does not fit the kubelet's layout has an
// UnexpectedEntry finding. Only real dirs are walked: a pods or plugins dir
// that is a symlink is resolved by the scan, and its entries are named by
// their resolved paths.
func fzCheckProblems(t *testing.T, n *fzNode, st *reconstruct.State) {
	t.Helper()
	found := map[string]bool{}
	for _, f := range st.Findings {
		if f.Kind == reconstruct.UnexpectedEntry {
			found[f.Path] = true
		}
	}
	var want []string
	expect := func(p string) { want = append(want, p) }
	// children lists host path dir (a path under the kubelet root) if it is a real dir.
	children := func(dir string) []fs.DirEntry {
		fi, err := os.Lstat(filepath.Join(n.hostRoot, dir))
		if err != nil || !fi.IsDir() {
			return nil
		}
		es, err := os.ReadDir(filepath.Join(n.hostRoot, dir))
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	// subdirs expects every child of dir to be a directory and returns those that are.
	subdirs := func(dir string) []string {
		var out []string
		for _, e := range children(dir) {
			if p := filepath.Join(dir, e.Name()); e.IsDir() {
				out = append(out, p)
			} else {
				expect(p)
			}
		}
		return out
	}
	uids := map[string]bool{}
	for _, v := range fzPods {
		uids[v.name] = v.isUID
	}
	for _, e := range children(fzPodsDir) {
		pod := filepath.Join(fzPodsDir, e.Name())
		if !e.IsDir() || !uids[e.Name()] {
			expect(pod)
			continue
		}
		for _, c := range children(pod) {
			p := filepath.Join(pod, c.Name())
			switch c.Name() {
			case "volumes":
				if !c.IsDir() {
					expect(p)
				}
				for _, plugin := range subdirs(p) {
					subdirs(plugin) // a Filesystem volume is a dir
				}
			case "volumeDevices":
				if !c.IsDir() {
					expect(p)
				}
				for _, plugin := range subdirs(p) {
					for _, v := range children(plugin) {
						if v.IsDir() { // a block volume is a map file or symlink
							expect(filepath.Join(plugin, v.Name()))
						}
					}
				}
			case "volume-subpaths":
				if !c.IsDir() {
					expect(p)
				}
				for _, vol := range subdirs(p) {
					subdirs(vol) // container dirs; index entries may be anything
				}
			}
		}
	}
	// lstat says what a path under the kubelet root is: "" (absent), "dir", "link" or "other".
	lstat := func(p string) string {
		fi, err := os.Lstat(filepath.Join(n.hostRoot, p))
		switch {
		case err != nil:
			return ""
		case fi.IsDir():
			return "dir"
		case fi.Mode()&fs.ModeSymlink != 0:
			return "link"
		}
		return "other"
	}
	for _, top := range []string{fzPodsDir, fzRoot + "/plugins"} {
		if lstat(top) == "other" {
			expect(top)
		}
	}
	kio := fzRoot + "/plugins/kubernetes.io"
	if lstat(fzRoot+"/plugins") == "dir" && lstat(kio) != "" && lstat(kio) != "dir" {
		expect(kio)
	}
	if lstat(fzRoot+"/plugins") == "dir" && lstat(kio) == "dir" {
		if s := lstat(kio + "/csi"); s != "" && s != "dir" {
			expect(kio + "/csi")
		}
		for _, d := range subdirs(kio + "/csi") {
			switch filepath.Base(d) {
			case "pv":
				for _, sd := range subdirs(d) {
					fzStagingProblems(children(sd), sd, expect)
				}
			case "volumeDevices":
				for _, spec := range subdirs(d) {
					if name := filepath.Base(spec); name == "staging" || name == "publish" {
						continue
					}
					for _, c := range children(spec) {
						if p := filepath.Join(spec, c.Name()); c.Name() != "dev" && c.Name() != "data" || !c.IsDir() {
							expect(p)
						}
					}
				}
			default: // a driver
				for _, sd := range subdirs(d) {
					fzStagingProblems(children(sd), sd, expect)
				}
			}
		}
	}
	for _, p := range want {
		if !found[p] && !fzNotRead(st, p) {
			t.Fatalf("no UnexpectedEntry finding for %s; findings:\n%s", p, fzFindings(st))
		}
	}
}

// fzNotRead says whether p is at or below a path the scan could not read,
// or may not enter (a FUSE or network mount where the layout has none):
// what lies there is unknown to it, and said so by a HungMount finding.
func fzNotRead(st *reconstruct.State, p string) bool {
	return slices.ContainsFunc(st.Findings, func(f reconstruct.Finding) bool {
		return fzUnread(f) && (p == f.Path || strings.HasPrefix(p, f.Path+"/"))
	})
}

// fzUnread says whether f is the HungMount of a path the scan could not
// read (not one a probe found hung).
func fzUnread(f reconstruct.Finding) bool {
	return f.Kind == reconstruct.HungMount && strings.HasPrefix(f.Message, "the scan could not read it")
}

// fzStagingProblems expects a finding for everything in a Filesystem
// staging dir but globalmount and vol_data.json.
func fzStagingProblems(es []fs.DirEntry, dir string, expect func(string)) {
	for _, c := range es {
		if c.Name() != "globalmount" && c.Name() != "vol_data.json" {
			expect(filepath.Join(dir, c.Name()))
		}
	}
}

func fzFindings(st *reconstruct.State) string {
	var b bytes.Buffer
	for _, f := range st.Findings {
		fmt.Fprintf(&b, "  %s %s: %s\n", f.Kind, f.Path, f.Message)
	}
	return b.String()
}

func fzCheckPlan(t *testing.T, st *reconstruct.State, plan *cleanup.ActionPlan, unmount, consistent bool, mountPoints []string) {
	t.Helper()
	pods := map[string]reconstruct.Pod{}
	for _, p := range st.Pods {
		pods[p.UID] = p
	}
	uncertain := map[string]string{}
	for _, v := range st.Volumes {
		if v.State == reconstruct.Uncertain {
			uncertain[v.PodUID] = v.Name
		}
	}
	unmounted := map[string]bool{}
	for i, a := range plan.Actions {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("plan (unmount %v) action %d %s %s (pod %q): %s\nmount points: %q", unmount, i, a.Action, a.Path, a.PodUID,
				fmt.Sprintf(format, args...), mountPoints)
		}
		switch a.Action {
		case cleanup.Keep, cleanup.NeedsDriver:
			continue
		case cleanup.Unmount:
			if !unmount {
				fail("an unmount in a plan that may not unmount")
			}
		case cleanup.Rmdir, cleanup.Unlink, cleanup.RemoveVolumeData:
			if !consistent {
				fail("a removal although the mount table is torn")
			}
		default:
			fail("unknown action kind")
		}
		if st.PodsDir != fzPodsDir && !strings.HasPrefix(st.PodsDir, fzRoot+"/") || !strings.HasPrefix(a.Path, st.PodsDir+"/") {
			fail("outside the pods dir %s", st.PodsDir)
		}
		pod, ok := pods[a.PodUID]
		switch {
		case !ok:
			fail("no such pod")
		case pod.Status != reconstruct.PodOrphaned:
			fail("the pod is %s, not Orphaned", pod.Status)
		case !atOrUnder(a.Path, pod.Path):
			fail("outside its pod dir %s", pod.Path)
		case uncertain[a.PodUID] != "":
			fail("the pod's volume %s is Uncertain", uncertain[a.PodUID])
		}
		if a.Action == cleanup.Unmount {
			unmounted[a.Path] = true
			continue
		}
		for _, mp := range mountPoints {
			if atOrUnder(st.PodsDir, mp) {
				continue // the filesystem the pods dir lives on
			}
			if (atOrUnder(a.Path, mp) || atOrUnder(mp, a.Path)) && !unmounted[mp] {
				fail("mount point %s is at, above or below it", mp)
			}
		}
	}
}

// fzSeeds are short programs for f.Add; the committed corpus holds longer ones.
func fzSeeds() [][]byte {
	return [][]byte{
		nil,
		// An orphaned pod (third UID) with an emptyDir and an unmounted CSI volume with its vol_data.json.
		{fzDir, 4, 2, 1, 0, fzFile, 6, 2, 0, 0, 0, 0, 1},
		// A symlink where a pod dir belongs, and a dir that is not a pod UID.
		{fzLinkOut, 1, 2, 1, fzDir, 1, 5},
		// A mounted tmpfs secret volume of an orphaned pod.
		{fzDir, 4, 2, 2, 2, fzMount, 0, 0, 0, 0, 1},
		// A torn mount table.
		{fzDir, 1, 2, fzMalformed, 1},
	}
}

// TestScanTreeReplay runs FuzzScanTree's checks on one corpus file kept
// outside testdata (VOLRECON_FUZZ_REPLAY=FILE), e.g. a failing input that is
// not committed, and logs the node with -v.
func TestScanTreeReplay(t *testing.T) {
	file := os.Getenv("VOLRECON_FUZZ_REPLAY")
	if file == "" {
		t.Skip("set VOLRECON_FUZZ_REPLAY to a FuzzScanTree corpus file")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	lit, ok := strings.CutPrefix(lines[len(lines)-1], "[]byte(")
	if !ok || len(lines) != 2 || lines[0] != "go test fuzz v1" {
		t.Fatalf("%s is not a FuzzScanTree corpus file", file)
	}
	program, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	if err != nil {
		t.Fatal(err)
	}
	fzCheckScan(t, fzBuildNode(t, fzTempDir(t), []byte(program)))
}

// fzLog logs the tree, the mount table, the findings and the plan (with -v).
func fzLog(t *testing.T, n *fzNode, st *reconstruct.State) {
	t.Helper()
	var b strings.Builder
	_ = filepath.WalkDir(n.hostRoot, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			fmt.Fprintf(&b, "  %s %s\n", d.Type(), strings.TrimPrefix(p, n.hostRoot))
		}
		return nil
	})
	fmt.Fprintf(&b, "mountinfo:\n%sfindings:\n%splan:\n", n.mountinfo, fzFindings(st))
	for _, a := range cleanup.Plan(t.Context(), st, cleanup.Options{Node: n.node()}).Actions {
		fmt.Fprintf(&b, "  %s %s: %s\n", a.Action, a.Path, a.Reason)
	}
	t.Logf("tree:\n%s", b.String())
}
