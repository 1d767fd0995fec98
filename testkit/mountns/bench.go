//go:build linux

package mountns

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/kubelet"
)

// benchFigures holds what each benchmark's child reported, by benchmark
// name (see reportOnce).
var benchFigures sync.Map // string -> []benchMetric

// benchMetric is one figure of a benchmark result line, e.g. 1234 ns/op.
type benchMetric struct {
	Value float64
	Unit  string
}

// EnterBenchmark is Enter for a benchmark. In the child it returns true and
// the benchmark runs there, in a private mount namespace, with the parent's
// -test.benchtime and -test.benchmem. In the parent it runs the child once,
// reports the child's figures as its own (ns/op included; only the
// iteration count printed is the parent's) and returns false. It skips the
// benchmark when not root.
func EnterBenchmark(b *testing.B) bool {
	b.Helper()
	if inChild(b) {
		return true
	}
	reportOnce(b, &benchFigures, func() *exec.Cmd { return childCommand(b.Name(), benchArgs(b.Name())...) })
	return false
}

// reportOnce reports as b's the figures of the child that child makes,
// run only the first time b is called: the testing package calls a
// benchmark function again with a larger b.N, and the child, which did its
// own sizing, must run only once. figures keeps them by benchmark name.
func reportOnce(b *testing.B, figures *sync.Map, child func() *exec.Cmd) {
	b.Helper()
	got, ok := figures.Load(b.Name())
	if !ok {
		metrics, err := runBench(child(), b.Name())
		if err != nil {
			b.Fatal(err)
		}
		got, _ = figures.LoadOrStore(b.Name(), metrics)
	}
	for _, m := range got.([]benchMetric) {
		b.ReportMetric(m.Value, m.Unit)
	}
}

// benchArgs runs the benchmark name alone, with this process's benchtime,
// benchmem and timeout.
func benchArgs(name string) []string {
	args := []string{"-test.run=^$", "-test.bench=" + runPattern(name), "-test.count=1"}
	for _, f := range []string{"test.benchtime", "test.benchmem", "test.timeout"} {
		if fl := flag.Lookup(f); fl != nil {
			args = append(args, "-"+f+"="+fl.Value.String())
		}
	}
	return args
}

// runBench runs a child that runs the benchmark name, and returns its figures.
func runBench(cmd *exec.Cmd, name string) ([]benchMetric, error) {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("benchmark child failed: %w\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if metrics, ok := parseBenchLine(name, line); ok {
			return metrics, nil
		}
	}
	return nil, fmt.Errorf("benchmark child printed no result for %s (skipped?):\n%s", name, out)
}

// parseBenchLine parses the result line of benchmark name, as the testing
// package prints it: the name with a -GOMAXPROCS suffix, the iteration
// count, then value-unit pairs.
func parseBenchLine(name, line string) ([]benchMetric, bool) {
	fields := strings.Fields(line)
	if len(fields) < 4 || len(fields)%2 != 0 || !isBenchName(fields[0], name) {
		return nil, false
	}
	if _, err := strconv.Atoi(fields[1]); err != nil {
		return nil, false
	}
	var metrics []benchMetric
	for i := 2; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return nil, false
		}
		metrics = append(metrics, benchMetric{Value: v, Unit: fields[i+1]})
	}
	return metrics, true
}

// isBenchName reports whether field is name, with or without the
// -GOMAXPROCS suffix the testing package adds when GOMAXPROCS > 1.
func isBenchName(field, name string) bool {
	procs, ok := strings.CutPrefix(field, name+"-")
	if !ok {
		return field == name
	}
	_, err := strconv.Atoi(procs)
	return err == nil
}

// slaveEnv marks the grandchild of EnterSlaveNamespace: the benchmark whose
// name it holds runs there.
const slaveEnv = "VOLRECON_TEST_MNTNS_SLAVE"

// slaveFigures is benchFigures for the runs in slave namespaces.
var slaveFigures sync.Map // string -> []benchMetric

// EnterSlaveNamespace is for a benchmark that reads a mount namespace whose
// mounts are slaves of another's, as a service's or a pod's are of the
// host's: the kernel then computes each mount's master and dominating peer
// group. Called in EnterBenchmark's child, it calls setup (which makes the
// mounts), makes every mount of the child's namespace shared, then runs the
// benchmark again, once, in a copy of that namespace (propagation
// unchanged) where every mount is made a slave; it reports that run's
// figures as its own and returns false. In the copy it returns true, and
// the benchmark goes on there; setup is not called again, its mounts are
// there already.
func EnterSlaveNamespace(b *testing.B, setup func()) bool {
	b.Helper()
	if os.Getenv(slaveEnv) == b.Name() {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			b.Fatalf("make every mount a slave: %v", err)
		}
		return true
	}
	reportOnce(b, &slaveFigures, func() *exec.Cmd {
		setup()
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
			b.Fatalf("make every mount shared: %v", err)
		}
		cmd := exec.Command(os.Args[0], benchArgs(b.Name())...)
		cmd.Env = append(os.Environ(), slaveEnv+"="+b.Name())
		// Cloneflags, not Unshareflags: Go would make every mount private.
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
		return cmd
	})
	return false
}

// BindMounts makes n bind mounts under dir, at paths shaped as a kubelet's
// CSI volumes (.../pods/<n>/volumes/kubernetes.io~csi/pvc-<n>/mount), so
// that each entry of the mount table is about as long as on a node. The
// kernel's time per mount(2) grows with the mounts in the namespace, so
// up to 999 are made one by one, each a directory bound onto itself, and
// the rest as recursive binds of those, 1,000 mounts a call. They go when
// the namespace does.
func BindMounts(tb testing.TB, dir string, n int) {
	tb.Helper()
	const perCopy = 999 // the mounts of the template; a copy adds one more, its root
	template := filepath.Join(dir, "t")
	bindOntoItself(tb, template, min(n, perCopy))
	n -= min(n, perCopy)
	for i := 0; n > perCopy; i++ {
		c := filepath.Join(dir, fmt.Sprintf("c%d", i))
		mkdir(tb, c)
		if err := unix.Mount(template, c, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			tb.Fatalf("recursive bind of %s: %v", template, err)
		}
		n -= perCopy + 1
	}
	bindOntoItself(tb, filepath.Join(dir, "r"), n)
}

// bindOntoItself makes n volume dirs under dir, each bound onto itself.
func bindOntoItself(tb testing.TB, dir string, n int) {
	tb.Helper()
	for i := range n {
		p := kubelet.Root(dir).CSIPublishTarget(fmt.Sprintf("%08d-8f0c-4d3e-9b7a-5c2e1f0a6b3d", i),
			fmt.Sprintf("pvc-%08d-1e2d-4c5b-8a79-0f1e2d3c4b5a", i))
		mkdir(tb, p)
		if err := unix.Mount(p, p, "", unix.MS_BIND, ""); err != nil {
			tb.Fatalf("bind mount %d of %d: %v", i+1, n, err)
		}
	}
}

func mkdir(tb testing.TB, p string) {
	tb.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		tb.Fatal(err)
	}
}
