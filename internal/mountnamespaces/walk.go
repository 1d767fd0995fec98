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

// seenTask is what one task showed.
type seenTask struct {
	Task
	ino uint64 // its namespace (0 = could not be told)
	why string // why not, then
	// pin is its namespace, opened here because it was not pinned yet.
	pin pin
	// holds: the task is live, in the namespace ino (or, not told, its own).
	holds bool
	// left: the task left the namespace ino between its readlink and the
	// open: the namespace was seen, and not pinned. moved: the namespace
	// its link named before the open, when it is in another (ino) since.
	left  bool
	moved uint64
	pods  []string
	// unattributed says why the task belongs to no pod ("" = it does).
	unattributed string
}

// process reads the tasks of one process: each one's namespace (pinned
// when it is not yet) and cgroup. It publishes nothing itself: bounded.Run
// may start it again (see there), and an abandoned run closes the pins it
// opened.
func (l *lister) process(wk *bounded.Walker, pid int) (seen []seenTask, err error) {
	published := false
	defer func() {
		if !published {
			for _, t := range seen {
				t.pin.close()
			}
		}
	}()
	dir := filepath.Join(l.procDir, strconv.Itoa(pid))
	names, err := bounded.Do(wk, filepath.Join(dir, "task"), func() ([]string, error) {
		return readDirNames(filepath.Join(dir, "task"), l.opts.maxTasks())
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
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		t, err := l.task(wk, Task{PID: pid, TID: tid})
		if t.holds || t.left || t.pin.f != nil {
			seen = append(seen, t)
		}
		if err != nil {
			return seen, err
		}
	}
	published = true
	return seen, nil
}

// task reads one task's namespace link and cgroup file, and pins its
// namespace if it is not pinned yet. A task that is gone, or a zombie,
// holds nothing: a task drops its namespaces as it exits (the link then
// gives ENOENT). This process's own threads that entered a namespace to
// read it are not the node's: skipped.
func (l *lister) task(wk *bounded.Walker, t Task) (seenTask, error) {
	dir := t.dir(l.procDir)
	seen := seenTask{Task: t}
	if t.PID == l.self && l.isReaderThread(wk, dir) {
		return seen, nil
	}
	link := filepath.Join(dir, "ns", "mnt")
	id, err := bounded.Do(wk, link, func() (string, error) { return os.Readlink(link) })
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if exited, serr := l.exited(wk, t); serr != nil || !exited {
			return seen, fmt.Errorf("%s has no mount namespace link, yet it has not exited: %w", t, errors.Join(err, serr))
		}
		return seen, nil
	case gone(err):
		return seen, nil
	case err != nil:
		// Which namespace it is needs ptrace access; its mountinfo is
		// world-readable, so it is read as a namespace of its own.
		seen.why = err.Error()
	default:
		var parsed bool
		if seen.ino, parsed = parseNsLink(id); !parsed {
			seen.why = fmt.Sprintf("its link reads %q", id)
		}
	}
	if seen.ino != 0 && !l.pinned(seen.ino) && !l.pinTask(wk, &seen, link, id) {
		return seen, nil
	}
	if before, ok := l.attributed[t]; ok && before.ino == seen.ino && seen.ino != 0 {
		seen.pods, seen.unattributed, seen.holds = before.pods, before.unattributed, true
		return seen, nil
	}
	seen.holds = l.attribute(wk, &seen)
	return seen, nil
}

// pinTask opens the task's namespace link, which read id. A task that
// left the namespace since (its link is gone, or names another) leaves it
// seen and not pinned (left, and false is returned); a task still in it
// whose link cannot be opened (a /proc made up by a test) leaves it
// unpinned, to be read through its tasks.
func (l *lister) pinTask(wk *bounded.Walker, seen *seenTask, link, id string) bool {
	p, err := bounded.Do(wk, link, func() (pin, error) { return openPin(link) })
	if err == nil {
		if p.ino != seen.ino { // it moved since: the namespace it is in now
			seen.moved = seen.ino
		}
		seen.pin, seen.ino = p, p.ino
		return true
	}
	again, err := bounded.Do(wk, link, func() (string, error) { return os.Readlink(link) })
	if gone(err) || err == nil && again != id {
		seen.left = true
		return false
	}
	return true
}

// attribute reads the task's cgroup file: the pods it belongs to. It
// returns false when the task exited meanwhile.
func (l *lister) attribute(wk *bounded.Walker, seen *seenTask) bool {
	dir := seen.dir(l.procDir)
	cgroup := filepath.Join(dir, "cgroup")
	data, err := bounded.Do(wk, cgroup, func() ([]byte, error) { return readLimited(cgroup, maxCgroupFileSize) })
	if gone(err) {
		link := filepath.Join(dir, "ns", "mnt")
		if _, lerr := bounded.Do(wk, link, func() (string, error) { return os.Readlink(link) }); gone(lerr) {
			return false
		}
	}
	switch {
	case err != nil:
		seen.unattributed = "its cgroup could not be read: " + err.Error()
	default:
		var first string
		seen.pods, first = podsOfCgroupFile(data)
		if uid, ok := l.opts.ContainerPIDs[seen.PID]; ok && !slices.Contains(seen.pods, uid) {
			seen.pods = append(seen.pods, uid)
		}
		if len(seen.pods) == 0 {
			seen.unattributed = "its cgroup " + first + " is no pod's"
		}
	}
	return true
}

// isReaderThread says whether the task at dir, one of this process's, is a
// thread that entered a namespace to read it (enterAndRead names them).
func (l *lister) isReaderThread(wk *bounded.Walker, dir string) bool {
	comm := filepath.Join(dir, "comm")
	data, err := bounded.Do(wk, comm, func() ([]byte, error) { return readLimited(comm, 64) })
	return err == nil && strings.TrimSuffix(string(data), "\n") == readerThreadName
}

// exited says whether a task without a namespace link is a zombie (or
// dead, or gone). A task drops its namespaces in do_exit a moment before
// it becomes a zombie: it is looked at again a few times first.
func (l *lister) exited(wk *bounded.Walker, t Task) (bool, error) {
	dir := t.dir(l.procDir)
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

// exitedTask says whether the task at dir is gone, a zombie or dead (the
// state in its stat file is Z or X), or exiting (PF_EXITING in its flags:
// do_exit sets it before the task drops its namespaces).
func exitedTask(dir string) (bool, error) {
	stat := filepath.Join(dir, "stat")
	data, err := readLimited(stat, 4096)
	if gone(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	// "tid (comm) S ppid pgrp session tty tpgid flags …": the comm may
	// hold anything, ')' too.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 || i+2 >= len(data) {
		return false, fmt.Errorf("%s: malformed", stat)
	}
	fields := strings.Fields(string(data[i+1:]))
	switch fields[0] {
	case "Z", "X", "x":
		return true, nil
	}
	if len(fields) > 6 {
		flags, err := strconv.ParseUint(fields[6], 10, 64)
		return err == nil && flags&pfExiting != 0, nil
	}
	return false, nil
}

// pfExiting is PF_EXITING of include/linux/sched.h.
const pfExiting = 0x4

// seenFD is a descriptor of a namespace's file in a process.
type seenFD struct {
	FD
	ino uint64 // the namespace its link named
	// pin is what the descriptor held when opened here, because ino was
	// not pinned yet: ino's file, or another namespace's if it was closed
	// and reused meanwhile (then ino is left seen and not pinned).
	pin pin
}

// descriptors looks for open namespace files in the descriptor tables of
// the process pid's live tasks. Threads share one table unless one
// unshared it (CLONE_FILES): a task's table is walked unless kcmp proves
// it one already walked; where kcmp cannot tell (procDir's PIDs are not
// this process's PID namespace's, or no kcmp), every task's is. This
// process's own descriptors are the walk's pins, not the node's holders.
func (l *lister) descriptors(wk *bounded.Walker, pid int, tids []int, budget *fdBudget) (seen []seenFD, err error) {
	published := false
	defer func() {
		if !published {
			for _, s := range seen {
				s.pin.close()
			}
		}
	}()
	var walked []int
	for _, tid := range tids {
		if l.sameTable(walked, tid) {
			continue
		}
		walked = append(walked, tid)
		found, err := l.descriptorsOf(wk, Task{PID: pid, TID: tid}, budget)
		seen = append(seen, found...)
		if err != nil {
			return seen, err
		}
	}
	published = true
	return seen, nil
}

// sameTable: tid shares the descriptor table of a task of walked.
func (l *lister) sameTable(walked []int, tid int) bool {
	if !l.sameProcNS {
		return false
	}
	for _, w := range walked {
		if same, err := sameFiles(w, tid); err == nil && same {
			return true
		}
	}
	return false
}

// descriptorsOf walks the descriptor table of one task.
func (l *lister) descriptorsOf(wk *bounded.Walker, t Task, budget *fdBudget) ([]seenFD, error) {
	dir := filepath.Join(t.dir(l.procDir), "fd")
	names, err := bounded.Do(wk, dir, func() ([]string, error) { return readDirNames(dir, l.opts.maxFDs()) })
	switch {
	case gone(err):
		return nil, nil // exited
	case err != nil:
		return nil, fmt.Errorf("the descriptors of %s: %w", t, err)
	case !budget.take(len(names)):
		return nil, fmt.Errorf("more than %d descriptors", l.opts.maxFDs())
	}
	var seen []seenFD
	for _, name := range names {
		n, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		path := filepath.Join(dir, name)
		target, err := bounded.Do(wk, path, func() (string, error) { return os.Readlink(path) })
		if gone(err) {
			continue // closed meanwhile
		}
		if err != nil {
			return seen, fmt.Errorf("descriptor %d of %s: %w", n, t, refused(err, ptraceRefusal))
		}
		ino, ok := parseNsLink(target)
		if !ok {
			continue
		}
		s := seenFD{FD: FD{Task: t, FD: n}, ino: ino}
		if !l.pinned(ino) {
			s.pin, _ = bounded.Do(wk, path, func() (pin, error) { return openPin(path) })
		}
		seen = append(seen, s)
	}
	return seen, nil
}

// fdBudget counts the descriptors looked at, against Options.MaxFDs.
type fdBudget struct {
	mu   sync.Mutex
	left int
}

func (b *fdBudget) take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left -= n
	return b.left >= 0
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

// TaskNamespaces returns the names of the mount namespaces the tasks of
// procDir are in now, as their links read ("mnt:[N]"), reading no table:
// a cheap way to tell that a namespace appeared since a List (a container
// started). A namespace that no task holds is not among them. A process
// or task that is gone is skipped; any other failure to read one is an
// error: the caller cannot tell. Within opts' bounds of count and time.
func TaskNamespaces(ctx context.Context, procDir string, opts Options) (map[string]bool, error) {
	pids, err := listPIDs(ctx, procDir, opts)
	if err != nil {
		return nil, err
	}
	return bounded.Call(ctx, procDir, opts.timeout(), func() (map[string]bool, error) {
		ids := map[string]bool{}
		for _, pid := range pids {
			dir := filepath.Join(procDir, strconv.Itoa(pid), "task")
			tids, err := readDirNames(dir, opts.maxTasks())
			if gone(err) {
				continue
			} else if err != nil {
				return nil, err
			}
			for _, tid := range tids {
				switch id, err := os.Readlink(filepath.Join(dir, tid, "ns", "mnt")); {
				case err == nil:
					ids[id] = true
				case !gone(err):
					return nil, err
				}
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		return ids, nil
	})
}
