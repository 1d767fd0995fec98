package mountnamespaces

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/volrecon/volrecon/internal/bounded"
)

// walkers is how many goroutines walk /proc: its reads cost CPU, not I/O.
const walkers = 2

// List lists the distinct mount namespaces of the tasks in procDir (the
// host's /proc, with hostPID in a container), and which pods each one's
// tasks belong to; it reads no table. On an error (wrapping
// ErrIncomplete), the namespaces found so far are returned with it, unless
// /proc itself could not be listed.
func List(ctx context.Context, procDir string, opts Options) ([]*Namespace, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	procDir, err := filepath.Abs(procDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIncomplete, err)
	}
	nss, errs := list(ctx, procDir, opts)
	return nss, errs.result(procDir)
}

// list is List, with its errors kept apart for Read to add to.
func list(ctx context.Context, procDir string, opts Options) ([]*Namespace, *errorList) {
	errs := &errorList{}
	pids, err := listPIDs(ctx, procDir, opts)
	if err != nil {
		errs.add(err)
		return nil, errs
	}
	w := &walk{procDir: procDir, opts: opts, index: map[string]*Namespace{}, errs: errs}
	if err := bounded.Run(ctx, len(pids), walkers, opts.timeout(), func(wk *bounded.Walker, i int) {
		tasks, err := w.process(wk, pids[i])
		w.merge(tasks, err)
	}); err != nil {
		errs.add(fmt.Errorf("walking %s: %w", procDir, err))
	}
	nss := w.namespaces()
	if len(nss) == 0 && errs.empty() {
		errs.add(fmt.Errorf("no task found in %s: is it the host's /proc?", procDir))
	}
	return nss, errs
}

// listPIDs lists the processes (thread-group leaders) in procDir.
func listPIDs(ctx context.Context, procDir string, opts Options) ([]int, error) {
	names, err := bounded.Call(ctx, procDir, opts.timeout(), func() ([]string, error) {
		return readDirNames(procDir, opts.maxTasks())
	})
	if err != nil {
		return nil, fmt.Errorf("listing the processes: %w", err)
	}
	pids := make([]int, 0, len(names))
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids, nil
}

// readDirNames lists dir, at most max names.
func readDirNames(dir string, max int) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	for {
		batch, err := f.Readdirnames(1024)
		names = append(names, batch...)
		if len(names) > max {
			return nil, fmt.Errorf("%s: more than %d entries", dir, max)
		}
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// walk gathers the tasks of every process into namespaces.
type walk struct {
	procDir string
	opts    Options

	mu     sync.Mutex
	index  map[string]*Namespace // by ID
	order  []*Namespace
	tasks  int
	counts map[*Namespace]*podCount
	errs   *errorList
}

// podCount is a namespace's attribution while it is gathered.
type podCount struct {
	pods         map[string]bool
	unattributed int
	why          string // of the first task not attributed
}

// seenTask is what one task showed.
type seenTask struct {
	Task
	ns   string // its namespace's ID ("" = could not be read)
	why  string // why not, then
	pods []string
	// unattributed says why the task belongs to no pod ("" = it does).
	unattributed string
}

// process reads the tasks of one process. It publishes nothing itself:
// bounded.Run may start it again (see there).
func (w *walk) process(wk *bounded.Walker, pid int) ([]seenTask, error) {
	dir := filepath.Join(w.procDir, strconv.Itoa(pid))
	names, err := bounded.Do(wk, filepath.Join(dir, "task"), func() ([]string, error) {
		return readDirNames(filepath.Join(dir, "task"), w.opts.maxTasks())
	})
	if gone(err) {
		if _, serr := bounded.Do(wk, dir, func() (os.FileInfo, error) { return os.Lstat(dir) }); gone(serr) {
			return nil, nil // exited
		}
		return nil, fmt.Errorf("pid %d exists but its tasks cannot be listed: %w", pid, err)
	}
	if err != nil {
		return nil, fmt.Errorf("tasks of pid %d: %w", pid, err)
	}
	var seen []seenTask
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		t, ok, err := w.task(wk, Task{PID: pid, TID: tid})
		if err != nil {
			return nil, err
		}
		if ok {
			seen = append(seen, t)
		}
	}
	return seen, nil
}

// task reads one task's namespace link and cgroup file. ok is false when
// the task is gone, or is a zombie: a task drops its namespaces as it
// exits (the link then gives ENOENT), and holds nothing after.
func (w *walk) task(wk *bounded.Walker, t Task) (seen seenTask, ok bool, err error) {
	dir := t.dir(w.procDir)
	seen.Task = t
	seen.ns, err = bounded.Do(wk, filepath.Join(dir, "ns", "mnt"), func() (string, error) { return os.Readlink(filepath.Join(dir, "ns", "mnt")) })
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if exited, serr := w.exited(wk, t); serr != nil || !exited {
			return seen, false, fmt.Errorf("%s has no mount namespace link, yet it has not exited: %w", t, errors.Join(err, serr))
		}
		return seen, false, nil
	case gone(err):
		return seen, false, nil
	case err != nil:
		// Which namespace it is needs ptrace access; its mountinfo is
		// world-readable, so it is read as a namespace of its own.
		seen.ns, seen.why = "", err.Error()
	}
	cgroup := filepath.Join(dir, "cgroup")
	data, err := bounded.Do(wk, cgroup, func() ([]byte, error) { return readLimited(cgroup, maxCgroupFileSize) })
	if gone(err) {
		link := filepath.Join(dir, "ns", "mnt")
		if _, lerr := bounded.Do(wk, link, func() (string, error) { return os.Readlink(link) }); gone(lerr) {
			return seen, false, nil // it exited meanwhile
		}
	}
	switch {
	case err != nil:
		seen.unattributed = "its cgroup could not be read: " + err.Error()
	default:
		var first string
		seen.pods, first = podsOfCgroupFile(data)
		if uid, ok := w.opts.ContainerPIDs[t.PID]; ok && !slices.Contains(seen.pods, uid) {
			seen.pods = append(seen.pods, uid)
		}
		if len(seen.pods) == 0 {
			seen.unattributed = "its cgroup " + first + " is no pod's"
		}
	}
	return seen, true, nil
}

// exited says whether a task without a namespace link is a zombie (or
// dead, or gone). A task drops its namespaces in do_exit a moment before
// it becomes a zombie: it is looked at again a few times first.
func (w *walk) exited(wk *bounded.Walker, t Task) (bool, error) {
	dir := t.dir(w.procDir)
	for attempt := 1; ; attempt++ {
		exited, err := bounded.Do(wk, filepath.Join(dir, "stat"), func() (bool, error) { return exitedTask(dir) })
		if exited || err != nil || attempt == exitAttempts {
			return exited, err
		}
		time.Sleep(exitWait)
	}
}

// exitAttempts and exitWait bound the wait for an exiting task.
const (
	exitAttempts = 10
	exitWait     = 10 * time.Millisecond
)

// exitedTask says whether the task at dir is gone, or a zombie or dead:
// the state in its stat file is Z or X.
func exitedTask(dir string) (bool, error) {
	stat := filepath.Join(dir, "stat")
	data, err := readLimited(stat, 4096)
	if gone(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	// "tid (comm) S …": the comm may hold anything, ')' too.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 || i+2 >= len(data) {
		return false, fmt.Errorf("%s: malformed", stat)
	}
	state := data[i+2]
	return state == 'Z' || state == 'X' || state == 'x', nil
}

// merge adds the tasks of one process to the namespaces.
func (w *walk) merge(tasks []seenTask, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errs.add(err)
		return
	}
	if w.counts == nil {
		w.counts = map[*Namespace]*podCount{}
	}
	for _, t := range tasks {
		if w.tasks++; w.tasks > w.opts.maxTasks() {
			w.errs.add(fmt.Errorf("more than %d tasks", w.opts.maxTasks()))
			return
		}
		ns := w.index[t.ns]
		if ns == nil || t.ns == "" {
			if len(w.order) == w.opts.maxNamespaces() {
				w.errs.add(fmt.Errorf("more than %d mount namespaces", w.opts.maxNamespaces()))
				return
			}
			ns = &Namespace{ID: t.ns, identified: t.ns != ""}
			if !ns.identified {
				ns.ID = "of " + t.String() + " (id unreadable: " + t.why + ")"
			} else {
				w.index[t.ns] = ns
			}
			w.order = append(w.order, ns)
			w.counts[ns] = &podCount{pods: map[string]bool{}}
		}
		ns.Tasks = append(ns.Tasks, t.Task)
		c := w.counts[ns]
		for _, uid := range t.pods {
			c.pods[uid] = true
		}
		if t.unattributed != "" {
			if c.unattributed++; c.why == "" {
				c.why = t.String() + ": " + t.unattributed
			}
		}
	}
}

// namespaces returns the namespaces in the order of their first task, with
// their attribution.
func (w *walk) namespaces() []*Namespace {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ns := range w.order {
		slices.SortFunc(ns.Tasks, compareTasks)
		c := w.counts[ns]
		for uid := range c.pods {
			ns.Pods.PodUIDs = append(ns.Pods.PodUIDs, uid)
		}
		sort.Strings(ns.Pods.PodUIDs)
		ns.Pods.Complete = c.unattributed == 0
		if c.unattributed > 0 {
			ns.Pods.Unattributed = fmt.Sprintf("%d of its %d tasks belong to no pod (%s)", c.unattributed, len(ns.Tasks), c.why)
		}
	}
	slices.SortFunc(w.order, func(a, b *Namespace) int { return compareTasks(a.Tasks[0], b.Tasks[0]) })
	return w.order
}

func compareTasks(a, b Task) int {
	if c := cmp.Compare(a.PID, b.PID); c != 0 {
		return c
	}
	return cmp.Compare(a.TID, b.TID)
}

// gone: the file's process or task no longer exists.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// readLimited reads a small /proc file, at most max bytes.
func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return data, nil
}
