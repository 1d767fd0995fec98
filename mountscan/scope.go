package mountscan

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unsafe"
)

// Scope is the part of the mount tree a caller asks about: the dirs given
// and everything below them. A table read within a scope (ReadFileScoped,
// Watcher.ReadScoped) keeps only the entries mounted at or below one of the
// dirs, or at a directory above one of them. On a busy node most of the
// table is container rootfs, shm and cgroup entries elsewhere, whose
// overlay super options alone can be most of its text; a scoped table
// holds none of it.
//
// For a path p at or below one of the dirs, a scoped table answers At,
// IsMountPoint, AtOrBelow and Containing exactly as the whole table does,
// and Refs and SameSubtree list exactly the entries that lie in the scope.
// Mounts and Len see only the kept entries; Skipped counts the others.
type Scope struct {
	dirs []string // tree keys of the dirs
	// subtrees holds the roots (tree keys) of the filesystem subtrees whose
	// every mount is kept, by device: a line of another device is passed
	// over at once.
	subtrees map[DevID][]string
}

// Subtree names a part of a filesystem: its device and a path inside it
// (a mount's Dev and Root). A mount of it, or of a part of it, shows the
// same files wherever it is mounted. It does not tell a deleted root
// (Mount.Deleted) from a live one at the same path: Contains takes both,
// so users are over-counted, never missed.
type Subtree struct {
	Dev  DevID
	Root string
}

// SubtreeOf is the subtree m mounts.
func SubtreeOf(m Mount) Subtree { return Subtree{Dev: m.Dev, Root: m.Root} }

// Contains reports whether m mounts t or a part of it: the same device,
// with a root at or below t's.
func (t Subtree) Contains(m Mount) bool {
	return m.Dev == t.Dev && isAtOrBelow(treeKey(m.Root), treeKey(t.Root))
}

// String is "major:minor:root"; the zero Subtree is "".
func (t Subtree) String() string {
	if t == (Subtree{}) {
		return ""
	}
	return t.Dev.String() + ":" + t.Root
}

// ParseSubtree parses "major:minor:root", as String prints it (a root is
// never empty: mountinfo prints "/" for a filesystem's own).
func ParseSubtree(s string) (Subtree, error) {
	major, rest, ok1 := strings.Cut(s, ":")
	minor, root, ok2 := strings.Cut(rest, ":")
	dev, err := ParseDevID(major + ":" + minor)
	if !ok1 || !ok2 || err != nil || root == "" {
		return Subtree{}, fmt.Errorf("%w: subtree %q is not major:minor:root", ErrMalformed, s)
	}
	return Subtree{Dev: dev, Root: root}, nil
}

// MarshalText is String: a Subtree is "major:minor:root" in JSON too.
func (t Subtree) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText parses "major:minor:root" (ParseSubtree); "" is the zero
// Subtree, which names no mount.
func (t *Subtree) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*t = Subtree{}
		return nil
	}
	sub, err := ParseSubtree(string(b))
	if err != nil {
		return err
	}
	*t = sub
	return nil
}

// NewScope returns the scope of the given absolute dirs; empty and
// relative ones are ignored, and so is a dir at or below another one, so
// that a scope of many paths under a few dirs costs as little as the dirs.
func NewScope(dirs ...string) *Scope {
	keys := make([]string, 0, len(dirs))
	for _, d := range dirs {
		if filepath.IsAbs(d) {
			keys = append(keys, treeKey(d))
		}
	}
	// Shortest first: a dir is kept only when no kept one holds it.
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b)) })
	s := &Scope{}
	for _, k := range keys {
		if !slices.ContainsFunc(s.dirs, func(d string) bool { return isAtOrBelow(k, d) }) {
			s.dirs = append(s.dirs, k)
		}
	}
	return s
}

// WithSubtrees returns a copy of s that also keeps every entry mounting one
// of the subtrees or a part of one, wherever it is mounted: every user of
// a staging mount, say, even outside the dirs. SameSubtree of such a
// subtree then answers as on the whole table.
func (s *Scope) WithSubtrees(subtrees ...Subtree) *Scope {
	c := &Scope{dirs: s.dirs, subtrees: make(map[DevID][]string, len(s.subtrees)+len(subtrees))}
	for dev, roots := range s.subtrees {
		c.subtrees[dev] = slices.Clip(roots)
	}
	for _, t := range subtrees {
		if t.Root == "" {
			continue
		}
		k := treeKey(t.Root)
		if roots := c.subtrees[t.Dev]; !slices.ContainsFunc(roots, func(r string) bool { return isAtOrBelow(k, r) }) {
			c.subtrees[t.Dev] = append(roots, k)
		}
	}
	return c
}

// Covers reports whether path lies at or below one of the scope's dirs, so
// that a scoped table answers for it.
func (s *Scope) Covers(path string) bool {
	k := queryKey(path)
	for _, d := range s.dirs {
		if isAtOrBelow(k, d) {
			return true
		}
	}
	return false
}

// keeps reports whether an entry with tree key k belongs in a scoped
// table: at or below a dir, or above one (the dirs' ancestors are what
// Containing walks up through). The root mount is always kept: without it
// no table passes for a live one (CheckLive).
func (s *Scope) keeps(k string) bool {
	if k == "/" {
		return true
	}
	for _, d := range s.dirs {
		if isAtOrBelow(k, d) || isAtOrBelow(d, k) {
			return true
		}
	}
	return false
}

// keepsSubtree reports whether m mounts one of the scope's subtrees.
func (s *Scope) keepsSubtree(m *Mount) bool {
	roots, ok := s.subtrees[m.Dev]
	if !ok {
		return false
	}
	k := treeKey(m.Root)
	return slices.ContainsFunc(roots, func(r string) bool { return isAtOrBelow(k, r) })
}

// ReadFileScoped is ReadFile keeping only the entries in scope (see
// Scope). The table is parsed as it is read, a chunk at a time, so the
// text of the whole table is never held: a kept entry's strings are
// copied. Where the kernel cannot flag changes, consecutive reads are
// compared by their digests (see contentDigest) instead of byte by byte.
func ReadFileScoped(ctx context.Context, path string, maxAttempts int, scope *Scope) (*Table, error) {
	w, err := Watch(path)
	if err == nil {
		defer w.Close()
		return w.ReadScoped(ctx, maxAttempts, scope)
	}
	if !errors.Is(err, ErrNotWatchable) {
		return nil, &ReadError{Path: path, Attempts: 1, Err: err}
	}
	return readScoped(ctx, path, readFileInto(path), nil, scope, maxAttempts, nil)
}

// readFileScopedAgain is ReadFileScoped of a file that cannot be watched,
// for a caller that holds last, read from path within a scope that covers
// scope: when the first read's digest is last's, the file holds the text
// last was parsed from, and last is returned; else that read counts as the
// first of ReadFileScoped's.
func readFileScopedAgain(ctx context.Context, path string, maxAttempts int, scope *Scope, last *Table) (*Table, error) {
	if err := ctx.Err(); err != nil {
		return nil, &ReadError{Path: path, Err: err}
	}
	read := readFileInto(path)
	first := newScopedParser(scope, true)
	if err := read(first); err != nil {
		return nil, &ReadError{Path: path, Attempts: 1, Err: err}
	}
	first.finish()
	if first.err == nil && last.digested && first.digest == last.digest {
		return last, nil
	}
	return readScoped(ctx, path, read, nil, scope, maxAttempts, first)
}

// readFileInto reads the file at path into a parser.
func readFileInto(path string) func(*scopedParser) error {
	return func(p *scopedParser) error {
		f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		return p.readFrom(f)
	}
}

// ReadScoped is Read keeping only the entries in scope, as ReadFileScoped.
func (w *Watcher) ReadScoped(ctx context.Context, maxAttempts int, scope *Scope) (*Table, error) {
	read := func(p *scopedParser) error {
		if _, err := w.f.Seek(0, 0); err != nil {
			return err
		}
		return p.readFrom(w.f)
	}
	if _, err := w.Changed(); err != nil { // only changes from now on count
		return nil, &ReadError{Path: w.path, Attempts: 0, Err: err}
	}
	return readScoped(ctx, w.path, read, w.unchanged, scope, maxAttempts, nil)
}

// readScoped is readConsistent for scoped tables: it stops at the first
// read after which unchanged (when not nil) reports no change since it
// began, or at the first read whose digest equals its predecessor's. A read
// is parsed only when its table may be returned: always with unchanged,
// else when the read before it was not parsed (its digest alone decides).
// A first read already made (not nil) counts as the first attempt.
func readScoped(ctx context.Context, name string, read func(*scopedParser) error, unchanged func() (bool, error), scope *Scope, maxAttempts int, first *scopedParser) (*Table, error) {
	if maxAttempts <= 1 {
		maxAttempts = DefaultMaxAttempts
	}
	prev, start := first, 1 // the previous read
	if first != nil {
		start = 2
	}
	for attempt := start; attempt <= maxAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, &ReadError{Path: name, Attempts: attempt - 1, Err: err}
		}
		parse := unchanged != nil || prev == nil || prev.digestOnly
		cur := newScopedParser(scope, !parse)
		if err := read(cur); err != nil {
			return nil, &ReadError{Path: name, Attempts: attempt, Err: err}
		}
		cur.finish()
		if testHookAfterRead != nil {
			testHookAfterRead()
		}
		if unchanged != nil {
			ok, err := unchanged()
			if err != nil {
				return nil, &ReadError{Path: name, Attempts: attempt, Err: err}
			}
			if ok {
				return cur.table(name, attempt)
			}
		}
		if prev != nil && prev.digest == cur.digest {
			if cur.digestOnly {
				return prev.table(name, attempt)
			}
			return cur.table(name, attempt)
		}
		prev = cur
	}
	return nil, &ReadError{Path: name, Attempts: maxAttempts, Err: ErrInconsistent}
}

// scopedParser parses one read of a table, a chunk at a time, into the
// entries in scope, and digests all of it.
type scopedParser struct {
	parser
	scope      *Scope
	digestOnly bool // only digest: the read decides nothing but equality
	sum        contentDigest
	digest     [2]uint64
	arena      []byte      // room for the text of kept lines; never grown in place
	blocks     []textBlock // every arena block
	lineNo     int
	skipped    int
	size       int  // bytes read
	lastNL     bool // the last byte read was a newline
	// err is what is wrong with the text read (a malformed or cut line):
	// the read's outcome, reported only if the read is the one agreed on,
	// as ReadFile parses only that one.
	err error
}

// scopedChunk is the size of one read; a longer line grows the buffer.
const scopedChunk = 256 << 10

// arenaChunk is the size of one block of kept text.
const arenaChunk = 64 << 10

func newScopedParser(scope *Scope, digestOnly bool) *scopedParser {
	p := &scopedParser{scope: scope, digestOnly: digestOnly, sum: newContentDigest()}
	p.parser = parser{index: newPathIndex(0), pool: stringPool{chunk: 256}}
	p.slow.pool = &p.pool
	return p
}

// readFrom reads f to EOF and parses every whole line. Only a regular file
// is read, at most MaxTableSize bytes, as readFrom does.
func (p *scopedParser) readFrom(f *os.File) error {
	if err := checkRegular(f); err != nil {
		return err
	}
	return p.read(f, scopedChunk)
}

// read reads r to EOF, chunk bytes at a time (more for a longer line), and
// parses every whole line.
func (p *scopedParser) read(r io.Reader, chunk int) error {
	buf := make([]byte, chunk)
	filled := 0 // buf[:filled] holds the start of an unfinished line
	for {
		if filled == len(buf) { // one line fills the buffer: make room
			buf = slices.Grow(buf[:filled], len(buf))[:2*len(buf)]
		}
		n, err := r.Read(buf[filled:])
		if n > 0 {
			p.size += n
			if p.size > MaxTableSize {
				return fmt.Errorf("%w (%d bytes)", ErrTooLarge, MaxTableSize)
			}
			p.sum.Write(buf[filled : filled+n])
			p.lastNL = buf[filled+n-1] == '\n'
			filled += n
			rest := p.lines(buf[:filled])
			filled = copy(buf, rest)
		}
		if err == io.EOF {
			return nil // a last line without its newline: finish refuses it
		}
		if err != nil {
			return err
		}
	}
}

// lines parses the whole lines of b and returns what follows the last
// newline.
func (p *scopedParser) lines(b []byte) []byte {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return b
		}
		p.line(b[:i])
		b = b[i+1:]
	}
}

// line parses one line, and keeps it when its mount point is in scope.
func (p *scopedParser) line(line []byte) {
	p.lineNo++
	if p.digestOnly || p.err != nil || len(line) == 0 {
		return
	}
	p.mounts = append(p.mounts, Mount{})
	m := &p.mounts[len(p.mounts)-1]
	tags := p.pool.mark()
	if !p.fast(m, line, p.lineNo) {
		var err error
		if *m, err = p.slow.parse(bytesView(line), p.lineNo); err != nil {
			p.err = err
			return
		}
	}
	if !p.scope.keeps(treeKey(m.MountPoint)) && !p.scope.keepsSubtree(m) {
		clear(m.OptionalFields) // no view of the read buffer stays in the pool
		p.pool.release(tags)
		p.mounts = p.mounts[:len(p.mounts)-1]
		p.skipped++
		return
	}
	p.own(m, line)
	p.index.add(m.MountPoint)
}

// own copies the text of a kept line into the arena and points m's
// strings at the copy; strings that are not views of line (the slow
// parser's unescaped ones) are the table's already.
func (p *scopedParser) own(m *Mount, line []byte) {
	if len(p.arena)+len(line) > cap(p.arena) {
		p.arena = make([]byte, 0, max(arenaChunk, len(line)))
		p.blocks = append(p.blocks, blockOf(p.arena))
	}
	start := len(p.arena)
	p.arena = append(p.arena, line...)
	text := p.arena[start:]
	rebase := func(s *string) {
		if len(*s) == 0 {
			return
		}
		off := uintptr(unsafe.Pointer(unsafe.StringData(*s))) - uintptr(unsafe.Pointer(&line[0]))
		if off < uintptr(len(line)) {
			*s = bytesView(text[off : int(off)+len(*s)])
		}
	}
	rebase(&m.Root)
	rebase(&m.MountPoint)
	rebase(&m.Options)
	for i := range m.OptionalFields {
		rebase(&m.OptionalFields[i])
	}
	rebase(&m.FSType)
	rebase(&m.Source)
	rebase(&m.SuperOptions)
}

// finish checks the end of the read and takes its digest. The kernel ends
// every line with a newline, so a table that does not end with one was
// cut short; that is said before any malformed line, as ReadFile does.
func (p *scopedParser) finish() {
	if p.size > 0 && !p.lastNL {
		p.err = &ParseError{Line: p.lineNo + 1, Field: "line", Reason: "truncated: no newline at the end of the table"}
	}
	p.digest = p.sum.sum()
}

// contentDigest tells two reads of a table apart: two 64-bit maphash
// sums of the text, under two seeds drawn at random when the process
// starts. It only has to tell one text from another, never to resist
// someone who knows the seeds (no one outside the process does, so no
// mount name can be chosen to collide), and it is some five times faster
// than SHA-256, which was a tenth of a rescan's CPU (BENCHMARKS.md).
type contentDigest struct{ a, b maphash.Hash }

// digestSeeds are the seeds of every contentDigest of the process: a
// table's digest is compared with one taken later (readFileScopedAgain).
var digestSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func newContentDigest() contentDigest {
	var d contentDigest
	d.a.SetSeed(digestSeeds[0])
	d.b.SetSeed(digestSeeds[1])
	return d
}

func (d *contentDigest) Write(b []byte) {
	_, _ = d.a.Write(b) // a maphash.Hash never fails
	_, _ = d.b.Write(b)
}

func (d *contentDigest) sum() [2]uint64 { return [2]uint64{d.a.Sum64(), d.b.Sum64()} }

// table returns the parsed table, checked as a live one must be.
func (p *scopedParser) table(name string, attempts int) (*Table, error) {
	if p.err != nil {
		return nil, &ReadError{Path: name, Attempts: attempts, Err: p.err}
	}
	mounts := p.mounts
	if cap(mounts)-len(mounts) > len(mounts)/8 {
		// The slice grew by appending: its spare room would live as long as
		// the table, whose other parts are sized exactly.
		mounts = slices.Clone(mounts)
	}
	t := newTable(slices.Clip(mounts), p.index)
	t.method = MethodMountinfo
	t.skipped, t.scope = p.skipped, p.scope
	t.digest, t.digested = p.digest, true
	t.text = slices.SortedFunc(slices.Values(p.blocks), func(a, b textBlock) int { return cmp.Compare(a.lo, b.lo) })
	if err := CheckLive(t); err != nil {
		return nil, &ReadError{Path: name, Attempts: attempts, Err: err}
	}
	return t, nil
}
