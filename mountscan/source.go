package mountscan

import (
	"context"
	"errors"

	"k8s.io/klog/v2"
)

// Source says where a node's mount table comes from: a mountinfo file
// (Path), or a function that hands over a table (Read: an agent that holds
// one, a test). The zero value is the calling process's own table,
// /proc/self/mountinfo.
type Source struct {
	// Path is the mountinfo file ("" = DefaultPath). A live /proc table is
	// watched for changes (Watch); any other file is read until two reads
	// agree.
	Path string
	// Read, if set, replaces reading Path. It is called afresh each time a
	// table is needed; its table is held to what a live one is (CheckLive).
	// A scope is not applied to it: the table is taken whole.
	Read func(ctx context.Context) (*Table, error)
	// MaxAttempts bounds the reads until one is known whole (<=1 means
	// DefaultMaxAttempts).
	MaxAttempts int
	// Method is how the table is read: MethodMountinfo ("" too) parses
	// Path. MethodStatmount asks listmount(2) and statmount(2) for the
	// table that Path lists, when Path is the caller's own
	// (/proc/self/mountinfo) or a process's (/proc/<pid>/mountinfo), and
	// parses Path where they cannot give it: a kernel without them, a
	// process without the privilege, a mount they cannot describe as
	// mountinfo does (see ReadStatmount). Table.Method says which read a
	// table, and Table.StatmountError why not statmount. Read, when set,
	// is called whatever Method says.
	Method Method
	// Events, if set, keeps the table of Path current from the kernel's
	// mount events (WatchEvents): a Current takes every table from it,
	// whole whatever the scope asked, and only what changed is read
	// again. The caller owns it (a Current does not close it). Read, when
	// set, is called instead.
	Events *EventWatch
}

// Name is how the table is named in the State and in errors: Path, or
// DefaultPath when it is not set.
func (s Source) Name() string {
	if s.Path == "" {
		return DefaultPath
	}
	return s.Path
}

// ReadScoped reads the table once, consistently, keeping the entries in
// scope (nil: the whole table). Errors are as ReadFile's, and a table from
// Read that is not a live one is ErrNoRootMount.
func (s Source) ReadScoped(ctx context.Context, scope *Scope) (*Table, error) {
	if s.Read != nil {
		return s.readFunc(ctx)
	}
	if !s.statmount() {
		return s.readMountinfo(ctx, scope)
	}
	table, err := s.readStatmount(ctx, scope, nil)
	if !errors.Is(err, ErrStatmountUnavailable) {
		return table, err
	}
	klog.FromContext(ctx).V(4).Info("Mount table read from mountinfo: listmount/statmount cannot give it", "path", s.Name(), "reason", err)
	table, err2 := s.readMountinfo(ctx, scope)
	markStatmountError(table, err)
	return table, err2
}

// statmount reports whether the table is asked of listmount and statmount.
func (s Source) statmount() bool { return s.Method == MethodStatmount && s.Read == nil }

// readStatmount reads the table Path lists by listmount and statmount,
// through w when it watches Path, else through a watch of its own while
// it reads (ReadFile's way).
func (s Source) readStatmount(ctx context.Context, scope *Scope, w *Watcher) (*Table, error) {
	target, err := resolveStatmountTarget(s.Name())
	if err != nil {
		return nil, &ReadError{Path: s.Name(), Err: err}
	}
	if w == nil {
		if w, err = Watch(s.Name()); err == nil {
			defer w.Close()
		} else {
			w = nil // read until two readings agree
		}
	}
	r := StatmountRead{Watch: w, MaxAttempts: s.MaxAttempts, Scope: scope, Name: s.Name()}
	return readStatmount(ctx, r, target)
}

// markStatmountError records on a table freshly read from mountinfo, which
// nobody holds yet, why listmount and statmount did not read it.
func markStatmountError(t *Table, why error) {
	if t != nil {
		t.statmountErr = why
	}
}

// readMountinfo reads and parses Path.
func (s Source) readMountinfo(ctx context.Context, scope *Scope) (*Table, error) {
	if scope == nil {
		return ReadFile(ctx, s.Name(), s.MaxAttempts)
	}
	return ReadFileScoped(ctx, s.Name(), s.MaxAttempts, scope)
}

func (s Source) readFunc(ctx context.Context) (*Table, error) {
	table, err := s.Read(ctx)
	if err == nil {
		err = CheckLive(table)
	}
	if err != nil {
		return nil, err
	}
	return table, nil
}

// Follow returns the node's current mount table as a Current. It starts
// watching now, before the first read, so that no change made after that
// read goes unseen. Close it when done.
func (s Source) Follow() *Current {
	c := &Current{src: s}
	if s.Read == nil && s.Events == nil {
		if w, err := Watch(s.Name()); err == nil {
			c.watch = w
		}
	}
	return c
}

// Current is a node's current mount table: a table that is read again only
// when it may have changed. Where the kernel flags the table's changes (a
// live /proc mountinfo, Watch), the last table read stays current until
// the kernel flags a mount, unmount, move or remount in the namespace;
// elsewhere every call reads afresh: a regular file once, its last table
// returned again if the file still holds the text it was parsed from, and
// Source.Read is called. A Current is not safe for concurrent use.
type Current struct {
	src   Source
	watch *Watcher // nil: read every time
	table *Table   // the last table read, while the watch says it is current
	scope *Scope   // the scope table was read within (nil: whole)
	// statmountErr, once listmount and statmount could not give a table
	// (Source.Method), keeps this Current on mountinfo: what the kernel
	// and the process's privileges allow does not change.
	statmountErr error
}

// Table returns a table, within scope (nil: the whole table), that has
// every change made before the call: the last one read if the watch saw no
// change since that read began and its scope covers scope, else a fresh
// read. A poll that fails counts as a change.
func (c *Current) Table(ctx context.Context, scope *Scope) (*Table, error) {
	if c.events() {
		return c.eventsTable(ctx, scope)
	}
	if c.watch == nil {
		return c.readUnwatched(ctx, scope)
	}
	if c.table != nil && c.scope.coversScope(scope) {
		if changed, err := c.watch.Changed(); err == nil && !changed {
			return c.table, nil
		}
	}
	return c.Reread(ctx, scope)
}

// Reread reads the table whatever the watch says: after a change of one's
// own that the kernel may not flag (a fake unmount in a test).
func (c *Current) Reread(ctx context.Context, scope *Scope) (*Table, error) {
	if c.events() {
		c.src.Events.Resync()
		return c.eventsTable(ctx, scope)
	}
	if c.watch == nil {
		return c.src.ReadScoped(ctx, scope)
	}
	c.table, c.scope = nil, nil // let it go before the next read
	table, err := c.readWatched(ctx, scope)
	if err != nil {
		return nil, err
	}
	c.table, c.scope = table, scope
	return table, nil
}

// readWatched reads the table through the watch: by listmount and
// statmount while they can give it (Source.Method), else from mountinfo.
func (c *Current) readWatched(ctx context.Context, scope *Scope) (*Table, error) {
	if table, done, err := c.tryStatmount(ctx, scope, c.watch); done {
		return table, err
	}
	var table *Table
	var err error
	if scope == nil {
		table, err = c.watch.Read(ctx, c.src.MaxAttempts)
	} else {
		table, err = c.watch.ReadScoped(ctx, c.src.MaxAttempts, scope)
	}
	markStatmountError(table, c.statmountErr)
	return table, err
}

// tryStatmount reads the table by listmount and statmount, through w when
// not nil, while they can give it (Source.Method); done is false when the
// table is to be read from mountinfo instead.
func (c *Current) tryStatmount(ctx context.Context, scope *Scope, w *Watcher) (table *Table, done bool, err error) {
	if !c.src.statmount() || c.statmountErr != nil {
		return nil, false, nil
	}
	table, err = c.src.readStatmount(ctx, scope, w)
	if !errors.Is(err, ErrStatmountUnavailable) {
		return table, true, err
	}
	klog.FromContext(ctx).V(2).Info("Mount table read from mountinfo from now on: listmount/statmount cannot give it", "path", c.src.Name(), "reason", err)
	c.statmountErr = err
	return nil, false, nil
}

// readUnwatched reads a table the kernel does not flag changes of. A
// file's last scoped table is kept, and returned again when a read of the
// file finds the text it was parsed from (readFileScopedAgain): one read
// instead of the two that agree.
func (c *Current) readUnwatched(ctx context.Context, scope *Scope) (*Table, error) {
	if table, done, err := c.tryStatmount(ctx, scope, nil); done {
		return table, err
	}
	if c.src.Read != nil {
		return c.src.readFunc(ctx)
	}
	if scope == nil {
		table, err := c.src.readMountinfo(ctx, nil)
		markStatmountError(table, c.statmountErr)
		return table, err
	}
	last := c.table
	if last == nil || !c.scope.coversScope(scope) {
		last, c.table, c.scope = nil, nil, nil // let it go before the next read
	}
	var table *Table
	var err error
	if last != nil {
		table, err = readFileScopedAgain(ctx, c.src.Name(), c.src.MaxAttempts, scope, last)
	} else {
		table, err = ReadFileScoped(ctx, c.src.Name(), c.src.MaxAttempts, scope)
	}
	if err != nil {
		c.table, c.scope = nil, nil
		return nil, err
	}
	if table != last {
		markStatmountError(table, c.statmountErr)
		c.table, c.scope = table, scope
	}
	return table, nil
}

// eventsTable is Source.Events' table, or, once the events cannot follow
// it, a read of the mountinfo file within scope.
func (c *Current) eventsTable(ctx context.Context, scope *Scope) (*Table, error) {
	table, err := c.src.Events.Table(ctx)
	if !errors.Is(err, ErrEventsUnavailable) {
		return table, err
	}
	table, err2 := c.src.readMountinfo(ctx, scope)
	markStatmountError(table, err)
	return table, err2
}

// events reports whether the table comes from Source.Events.
func (c *Current) events() bool { return c.src.Events != nil && c.src.Read == nil }

// Watched reports whether the kernel flags the table's changes, so that
// Table re-reads only after one.
func (c *Current) Watched() bool { return c.watch != nil }

// Release lets the last table go: the next Table reads afresh.
func (c *Current) Release() { c.table, c.scope = nil, nil }

// Close stops watching and lets the last table go.
func (c *Current) Close() error {
	c.Release()
	if c.watch == nil {
		return nil
	}
	err := c.watch.Close()
	c.watch = nil
	return err
}

// coversScope reports whether a table read within s answers for every dir
// and subtree of other (nil: the whole table, which only a whole table
// covers).
func (s *Scope) coversScope(other *Scope) bool {
	switch {
	case s == nil:
		return true
	case other == nil:
		return false
	}
	for _, d := range other.dirs {
		if !s.Covers(d) {
			return false
		}
	}
	for dev, roots := range other.subtrees {
		for _, r := range roots {
			if !s.keepsSubtree(&Mount{Dev: dev, Root: r}) {
				return false
			}
		}
	}
	return true
}
