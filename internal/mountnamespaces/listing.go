package mountnamespaces

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/mountscan"
)

// maxListings bounds the listings of one List: they are repeated until two
// consecutive ones agree.
const maxListings = 16

// Test hooks: kernelListing off makes List find the namespaces by walking
// only (as on a kernel before 6.12); afterListing runs after each listing.
var (
	kernelListing                   = true
	afterListing  func(listing int) = nil
)

// List finds every mount namespace the kernel holds for the node, pins
// each (holds its file open: see Namespace.Close) and says what holds it
// and whose it is; it reads no table for the caller (ReadTable does).
//
// The namespaces are found through the tasks in procDir (the host's /proc,
// with hostPID in a container), through the binds of namespace files in
// the tables of the namespaces found (recursively), and through the open
// namespace descriptors of the processes; where the kernel lists every
// mount namespace (Linux 6.12, as root in the initial user namespace, and
// procDir a real procfs) its list is the complete one, and the walks only
// say what holds each. The listing is repeated until two consecutive
// listings find the same namespaces, within Options.Timeout.
//
// A namespace seen but not pinned (whatever held it went before it could
// be opened) is an error that names it, unless the kernel's complete list
// shows it gone. On an error (wrapping ErrIncomplete), the namespaces
// found so far are returned with it, pinned.
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
	l := newLister(procDir, opts)
	log := klog.FromContext(ctx)
	var prev map[uint64]bool
	n := 0
	for {
		n++
		cur := l.listing(ctx)
		if afterListing != nil {
			afterListing(n)
		}
		if !l.errs.empty() || prev != nil && maps.Equal(prev, cur) {
			break
		}
		if n == maxListings || ctx.Err() != nil {
			l.errs.add(fmt.Errorf("the mount namespaces changed between each two of %d listings (%v)", n, context.Cause(ctx)))
			break
		}
		if prev != nil {
			log.V(4).Info("The mount namespaces changed between two listings: listing again", "before", len(prev), "now", len(cur))
		}
		prev = cur
	}
	if l.complete && l.errs.empty() {
		l.describe(ctx)
	}
	nss := l.finish()
	log.V(2).Info("Listed the mount namespaces", "procDir", procDir, "namespaces", len(nss), "listings", n,
		"kernelList", l.kernel, "kernelListComplete", l.complete, "complete", l.errs.empty())
	return nss, l.errs
}

// lister finds the namespaces, listing after listing.
type lister struct {
	procDir string
	opts    Options
	// self is this process's PID as procDir shows it: its descriptors are
	// the walk's own pins, and its reader threads the walk's own.
	self int
	// sameProcNS: procDir's PIDs are those of this process's PID
	// namespace (kcmp takes those).
	sameProcNS bool
	// kernel: the kernel's list is used; complete: it holds every namespace.
	kernel, complete bool

	mu      sync.Mutex
	byIno   map[uint64]*Namespace
	order   []*Namespace             // every namespace with an inode, in the order found
	unnamed []*Namespace             // this listing's namespaces of tasks whose link could not be read
	counts  map[*Namespace]*podCount // this listing's attribution
	// attributed holds what each task showed in the listing before, and
	// attributing in this one: a task still in the same namespace is not
	// asked its cgroup again.
	attributed, attributing map[Task]seenTask
	tids                    map[int][]int       // this listing's live tasks, by process
	tasks                   int                 // in this listing
	binds                   map[uint64][]Bind   // the binds seen in the tables read, by namespace
	tablesRead              map[*Namespace]bool // by List, for the binds in them
	missing                 map[uint64]string   // seen, never pinned: where
	errs                    *errorList
}

// podCount is a namespace's attribution while it is gathered.
type podCount struct {
	pods         map[string]bool
	unattributed int
	why          string // of the first task not attributed
}

func newLister(procDir string, opts Options) *lister {
	l := &lister{procDir: procDir, opts: opts, byIno: map[uint64]*Namespace{}, binds: map[uint64][]Bind{},
		tablesRead: map[*Namespace]bool{}, missing: map[uint64]string{}, errs: &errorList{}}
	procfs := isProcfs(procDir)
	// This process is procDir/self in a procfs (none: not in its PID
	// namespace); in a dir of links to some processes (a test's), its
	// own PID. Its PIDs are this PID namespace's, as kcmp takes them, when
	// procDir/<this PID> is this very process.
	l.self = -1
	if s, err := os.Readlink(filepath.Join(procDir, "self")); err == nil {
		l.self, _ = strconv.Atoi(s)
	} else if !procfs {
		l.self = os.Getpid()
	}
	l.sameProcNS = sameFile(filepath.Join(procDir, strconv.Itoa(os.Getpid())), "/proc/self")
	// The kernel's list is the node's where procDir is a real procfs; a
	// dir of links to some processes (a test's) names what to look at.
	l.kernel = kernelListing && procfs
	l.complete = l.kernel && kernelListComplete()
	return l
}

// listing lists the namespaces once, pinning the new ones, and returns the
// inodes of those it found. Without the kernel's complete list, the
// descriptors of every process, and the tables of every namespace found
// (for the binds of further namespaces in them), are part of it.
func (l *lister) listing(ctx context.Context) map[uint64]bool {
	l.start()
	cur := map[uint64]bool{}
	if l.kernel {
		l.listKernel(ctx, cur)
	}
	l.walkTasks(ctx, cur)
	if !l.errs.empty() || l.complete {
		return cur
	}
	l.walkDescriptors(ctx, cur, true)
	l.readForBinds(ctx, cur, false)
	l.mu.Lock()
	defer l.mu.Unlock()
	for ino := range l.binds {
		cur[ino] = true
	}
	return cur
}

// describe says what holds each namespace that has no task, once the
// kernel's complete list has found them all: the descriptors, then the
// binds in the tables, until every one is said. What cannot be looked at
// leaves a holder unsaid, and the namespace nobody's pod all the same.
func (l *lister) describe(ctx context.Context) {
	if l.unexplained() {
		l.walkDescriptors(ctx, map[uint64]bool{}, false)
	}
	if l.unexplained() {
		l.readForBinds(ctx, map[uint64]bool{}, true)
	}
}

// start forgets what the listing before saw of the tasks and, without the
// kernel's complete list, of the binds: each listing reads every table
// again, for the binds made since.
func (l *lister) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ns := range l.order {
		ns.Tasks, ns.Listed = nil, false
	}
	if !l.complete {
		l.binds, l.tablesRead = map[uint64][]Bind{}, map[*Namespace]bool{}
	}
	l.unnamed, l.tasks = nil, 0
	l.counts, l.tids = map[*Namespace]*podCount{}, map[int][]int{}
	l.attributed, l.attributing = l.attributing, map[Task]seenTask{}
}

// listKernel pins the namespaces of the kernel's list. With the complete
// list, a namespace seen before but never pinned that it no longer holds
// is gone: nothing holds it any more.
func (l *lister) listKernel(ctx context.Context, cur map[uint64]bool) {
	pins, err := kernelList(ctx, l.opts.maxNamespaces())
	if errors.Is(err, errNoKernelList) {
		klog.FromContext(ctx).V(4).Info("No kernel list of mount namespaces: walking only", "reason", err)
		l.kernel, l.complete = false, false
		return
	}
	if err != nil {
		l.errs.add(err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range pins {
		if ns := l.adoptLocked(p); ns != nil {
			ns.Listed = true
			cur[p.ino] = true
		}
	}
	if l.complete {
		for ino := range l.missing {
			if !cur[ino] {
				klog.FromContext(ctx).V(4).Info("A mount namespace seen but not pinned is gone: the kernel lists it no more", "namespace", nsID(ino))
				delete(l.missing, ino)
			}
		}
	}
}

// pinned says whether the namespace ino is pinned.
func (l *lister) pinned(ino uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ns := l.byIno[ino]
	return ns != nil && ns.pin != nil
}

// adoptLocked makes p the pin of its namespace, a new one or one known
// unpinned; a second pin of a namespace is closed. nil when there are too
// many namespaces.
func (l *lister) adoptLocked(p pin) *Namespace {
	ns := l.byIno[p.ino]
	switch {
	case ns != nil && ns.pin == nil:
		ns.pin = p.f
	case ns != nil:
		p.close()
	default:
		if ns = l.addLocked(p.ino); ns == nil {
			p.close()
			return nil
		}
		ns.pin = p.f
	}
	delete(l.missing, p.ino)
	return ns
}

// addLocked adds the namespace ino, unpinned; nil when there are too many.
func (l *lister) addLocked(ino uint64) *Namespace {
	if !l.room() {
		return nil
	}
	ns := &Namespace{ID: nsID(ino), Inode: ino, identified: true}
	l.byIno[ino] = ns
	l.order = append(l.order, ns)
	return ns
}

func (l *lister) room() bool {
	if len(l.order)+len(l.unnamed) >= l.opts.maxNamespaces() {
		l.errs.add(fmt.Errorf("more than %d mount namespaces", l.opts.maxNamespaces()))
		return false
	}
	return true
}

// walkTasks walks every task in procDir; without the kernel's complete
// list, then the processes started since, until they bring no namespace
// more (walkNewTasks).
func (l *lister) walkTasks(ctx context.Context, cur map[uint64]bool) {
	pids, err := listPIDs(ctx, l.procDir, l.opts)
	if err != nil {
		l.errs.add(err)
		return
	}
	l.walkProcesses(ctx, pids, cur)
	if !l.complete && l.errs.empty() {
		l.walkNewTasks(ctx, pids, cur)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ns := range slices.Concat(l.order, l.unnamed) {
		slices.SortFunc(ns.Tasks, compareTasks)
	}
	if l.tasks == 0 && l.errs.empty() {
		l.errs.add(fmt.Errorf("no task found in %s: is it the host's /proc?", l.procDir))
	}
}

// walkProcesses walks the tasks of the processes pids. It returns false
// when one of them showed no task that holds a namespace (it exited, or
// its tasks left theirs, meanwhile).
func (l *lister) walkProcesses(ctx context.Context, pids []int, cur map[uint64]bool) bool {
	var unsettled atomic.Bool
	if err := bounded.Run(ctx, len(pids), walkers, l.opts.timeout(), func(wk *bounded.Walker, i int) {
		seen, err := l.process(wk, pids[i])
		if err == nil && !slices.ContainsFunc(seen, func(t seenTask) bool { return t.holds }) {
			unsettled.Store(true)
		}
		l.mergeTasks(seen, err, cur)
	}); err != nil {
		l.errs.add(fmt.Errorf("walking %s: %w", l.procDir, err))
	}
	return !unsettled.Load()
}

// maxNewTaskRounds bounds the lists of the processes started during a walk.
const maxNewTaskRounds = 64

// walkNewTasks walks the processes started since walked were listed, list
// after list of them, until a list brings none, or brings only processes
// that each showed a task in a namespace found already. A namespace
// carried by tasks that each live a moment (each starts the next and
// exits) has, at any time, a task that is newer than the list the walk
// started from: by the time a walk of every process reaches the tasks it
// listed, they are gone, listing after listing, and the namespace is
// never seen. A list of only the processes started since is walked at
// once, and reaches the task alive when it was made, or sees it gone and
// lists again. Lists that never settle are an error.
func (l *lister) walkNewTasks(ctx context.Context, walked []int, cur map[uint64]bool) {
	done := make(map[int]bool, len(walked))
	for _, pid := range walked {
		done[pid] = true
	}
	for round := 1; ; round++ {
		pids, err := listPIDs(ctx, l.procDir, l.opts)
		if err != nil {
			l.errs.add(err)
			return
		}
		fresh := slices.DeleteFunc(pids, func(pid int) bool { return done[pid] })
		if len(fresh) == 0 {
			return
		}
		if round > maxNewTaskRounds || ctx.Err() != nil {
			l.errs.add(fmt.Errorf("processes kept starting in %s and exiting before they could be read, %d lists in a row (%v)", l.procDir, round-1, context.Cause(ctx)))
			return
		}
		for _, pid := range fresh {
			done[pid] = true
		}
		before := l.found(cur)
		settled := l.walkProcesses(ctx, fresh, cur)
		if !l.errs.empty() || settled && l.found(cur) == before {
			return
		}
	}
}

// found is how many namespaces this listing found so far.
func (l *lister) found(cur map[uint64]bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(cur) + len(l.unnamed)
}

// mergeTasks adds the tasks of one process to the namespaces.
func (l *lister) mergeTasks(seen []seenTask, err error, cur map[uint64]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errs.add(err)
		return
	}
	for i, t := range seen {
		if t.pin.f != nil && l.adoptLocked(t.pin) == nil {
			for _, rest := range seen[i+1:] {
				rest.pin.close()
			}
			return
		}
		if t.ino != 0 {
			cur[t.ino] = true
		}
		left := t.moved
		if t.left {
			left = t.ino
		}
		if left != 0 && !l.pinnedLocked(left) {
			cur[left] = true
			l.missing[left] = "seen in " + t.Task.String() + ", which left it before it could be pinned"
		}
		if !t.holds {
			continue
		}
		if l.tasks++; l.tasks > l.opts.maxTasks() {
			l.errs.add(fmt.Errorf("more than %d tasks", l.opts.maxTasks()))
			return
		}
		ns := l.namespaceOfLocked(t)
		if ns == nil {
			return
		}
		l.tids[t.PID] = append(l.tids[t.PID], t.TID)
		if t.ino != 0 {
			l.attributing[t.Task] = seenTask{ino: t.ino, pods: t.pods, unattributed: t.unattributed}
		}
		ns.Tasks = append(ns.Tasks, t.Task)
		c := l.counts[ns]
		if c == nil {
			c = &podCount{pods: map[string]bool{}}
			l.counts[ns] = c
		}
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

func (l *lister) pinnedLocked(ino uint64) bool {
	ns := l.byIno[ino]
	return ns != nil && ns.pin != nil
}

// namespaceOfLocked returns the namespace of a task that holds one: by its
// inode, or, when its link could not be read, one of its own.
func (l *lister) namespaceOfLocked(t seenTask) *Namespace {
	if t.ino != 0 {
		if ns := l.byIno[t.ino]; ns != nil {
			return ns
		}
		return l.addLocked(t.ino)
	}
	if !l.room() {
		return nil
	}
	ns := &Namespace{ID: "of " + t.Task.String() + " (id unreadable: " + t.why + ")"}
	l.unnamed = append(l.unnamed, ns)
	return ns
}

// walkDescriptors looks for open namespace files in every process of this
// listing but this one. Unless they are required (the kernel's list is not
// complete), what cannot be looked at only leaves a holder unsaid.
func (l *lister) walkDescriptors(ctx context.Context, cur map[uint64]bool, required bool) {
	l.mu.Lock()
	var pids []int
	tids := map[int][]int{}
	for pid, ts := range l.tids {
		if pid != l.self {
			pids = append(pids, pid)
			tids[pid] = slices.Clone(ts)
		}
	}
	for _, ns := range l.order {
		ns.FDs = nil
	}
	l.mu.Unlock()
	sort.Ints(pids)
	budget := &fdBudget{left: l.opts.maxFDs()}
	errs := &errorList{}
	if err := bounded.Run(ctx, len(pids), walkers, l.opts.timeout(), func(wk *bounded.Walker, i int) {
		seen, err := l.descriptors(wk, pids[i], tids[pids[i]], budget)
		l.mergeDescriptors(seen, err, cur, errs)
	}); err != nil {
		errs.add(fmt.Errorf("walking the descriptors in %s: %w", l.procDir, err))
	}
	switch {
	case errs.empty():
	case required:
		l.mu.Lock()
		for _, err := range errs.first {
			l.errs.add(err)
		}
		l.mu.Unlock()
	default:
		klog.FromContext(ctx).V(4).Info("Some descriptors could not be looked at: what holds a namespace may be left unsaid", "err", errs.result(l.procDir))
	}
}

// mergeDescriptors adds the descriptors of one process to the namespaces.
func (l *lister) mergeDescriptors(seen []seenFD, err error, cur map[uint64]bool, errs *errorList) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		errs.add(err)
		return
	}
	for i, s := range seen {
		if s.pin.f != nil && l.adoptLocked(s.pin) == nil {
			for _, rest := range seen[i+1:] {
				rest.pin.close()
			}
			return
		}
		cur[s.ino] = true
		if s.pin.f != nil {
			cur[s.pin.ino] = true
			l.byIno[s.pin.ino].FDs = append(l.byIno[s.pin.ino].FDs, s.FD)
		} else if ns := l.byIno[s.ino]; ns != nil && ns.pin != nil {
			ns.FDs = append(ns.FDs, s.FD)
		}
		if !l.pinnedLocked(s.ino) {
			l.missing[s.ino] = "seen as " + s.FD.String() + ", closed before it could be pinned"
		}
	}
}

// unexplained says whether a namespace has no task, no bind and no
// descriptor seen: what holds it is still to be found.
func (l *lister) unexplained() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ns := range l.order {
		if len(ns.Tasks) == 0 && len(ns.FDs) == 0 && len(l.binds[ns.Inode]) == 0 {
			return true
		}
	}
	return false
}

// readForBinds reads the table of every namespace not read yet, and of
// those found bound in them, for the nsfs binds they hold: each bound
// namespace not pinned yet is pinned from inside the namespace of the
// bind. Without the kernel's complete list, a table that cannot be read
// leaves the namespaces bound in it unknown: an error. untilSaid stops
// once every namespace's holder is said (the namespaces without a task,
// which snapd-like pins hold in each other, are read first).
func (l *lister) readForBinds(ctx context.Context, cur map[uint64]bool, untilSaid bool) {
	for {
		todo := l.unread()
		if len(todo) == 0 {
			return
		}
		for _, ns := range todo {
			if untilSaid && !l.unexplained() {
				return
			}
			h := &handoff{}
			_, _, err := ns.read(ctx, l.procDir, l.opts, func(t *mountscan.Table) []wantedBind { return l.noteBinds(ns, t) }, h)
			l.adoptBinds(h.take())
			if err != nil && !l.complete {
				l.errs.add(fmt.Errorf("%s: its table, where binds of other namespaces may be, could not be read: %w", ns, err))
			}
		}
	}
}

// unread returns the namespaces whose tables List has not read yet, those
// without a task first, and marks them read.
func (l *lister) unread() []*Namespace {
	l.mu.Lock()
	defer l.mu.Unlock()
	var todo []*Namespace
	for _, ns := range slices.Concat(l.order, l.unnamed) {
		if !l.tablesRead[ns] {
			l.tablesRead[ns] = true
			todo = append(todo, ns)
		}
	}
	slices.SortStableFunc(todo, func(a, b *Namespace) int { return cmp.Compare(min(len(a.Tasks), 1), min(len(b.Tasks), 1)) })
	return todo
}

// noteBinds records the nsfs binds of mount namespaces in table, of the
// namespace in, and returns those whose namespaces are not pinned yet.
func (l *lister) noteBinds(in *Namespace, table *mountscan.Table) []wantedBind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var wanted []wantedBind
	for _, m := range table.Mounts() {
		if m.FSType != "nsfs" {
			continue
		}
		ino, ok := parseNsLink(m.Root)
		if !ok {
			continue
		}
		b := Bind{Path: m.MountPoint, In: in.ID}
		l.binds[ino] = append(l.binds[ino], b)
		if !l.pinnedLocked(ino) {
			wanted = append(wanted, wantedBind{Bind: b, ino: ino})
		}
	}
	return wanted
}

// adoptBinds pins the namespaces whose binds a read opened; a bind that
// could not be opened leaves its namespace seen and not pinned.
func (l *lister) adoptBinds(got []boundPin) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range got {
		if b.err == nil {
			l.adoptLocked(b.pin)
		} else if !l.pinnedLocked(b.ino) {
			l.missing[b.ino] = "bound at " + b.Path + " in mount namespace " + b.In + ", which could not be opened: " + b.err.Error()
		}
	}
}

// finish names the namespaces that could not be pinned, attributes each
// namespace to pods, and sorts them: those with tasks by their first task,
// then the others by inode.
func (l *lister) finish() []*Namespace {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ino := range slices.Sorted(maps.Keys(l.missing)) {
		l.errs.add(fmt.Errorf("mount namespace %s, %s, may still hold mounts", nsID(ino), l.missing[ino]))
	}
	nss := slices.Concat(l.order, l.unnamed)
	for _, ns := range nss {
		if ns.identified {
			ns.Binds = l.binds[ns.Inode]
		}
		ns.Pods = l.attribution(ns)
	}
	slices.SortStableFunc(nss, func(a, b *Namespace) int {
		switch {
		case len(a.Tasks) > 0 && len(b.Tasks) > 0:
			return compareTasks(a.Tasks[0], b.Tasks[0])
		case len(a.Tasks) > 0:
			return -1
		case len(b.Tasks) > 0:
			return 1
		}
		return cmp.Compare(a.Inode, b.Inode)
	})
	return nss
}

// attribution says whose the namespace is, from the last listing's tasks.
func (l *lister) attribution(ns *Namespace) Attribution {
	if len(ns.Tasks) == 0 {
		return Attribution{Unattributed: "no task is in it (" + ns.holder() + ")"}
	}
	c := l.counts[ns]
	var a Attribution
	for uid := range c.pods {
		a.PodUIDs = append(a.PodUIDs, uid)
	}
	sort.Strings(a.PodUIDs)
	a.Complete = c.unattributed == 0
	if c.unattributed > 0 {
		a.Unattributed = fmt.Sprintf("%d of its %d tasks belong to no pod (%s)", c.unattributed, len(ns.Tasks), c.why)
	}
	return a
}

// sameFile: a and b are one file (device and inode).
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
