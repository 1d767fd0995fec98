package mountscan

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strings"
	"unsafe"
)

// Parse reads all of r once and parses it as mountinfo. It makes no
// consistency check: use ReadFile for a live mount table.
func Parse(r io.Reader) (*Table, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return parseOwned(trimmed(b)) // nobody else holds b
}

// ParseBytes parses a whole mountinfo file. Empty lines are skipped (line
// numbers still count them); any other line that is not a valid mountinfo
// line makes it fail with a *ParseError. ParseBytes copies b once and the
// strings of the returned table share that private copy: b may be reused or
// changed afterwards, and holding any Mount keeps the copy alive.
func ParseBytes(b []byte) (*Table, error) {
	return parseOwned(bytes.Clone(b))
}

// FromLines parses literal mountinfo lines, as tests and examples write them.
func FromLines(lines ...string) (*Table, error) {
	n := len(lines)
	for _, l := range lines {
		n += len(l)
	}
	buf := make([]byte, 0, n)
	for i, l := range lines {
		if i > 0 {
			buf = append(buf, '\n')
		}
		buf = append(buf, l...)
	}
	return parseOwned(buf)
}

// MustFromLines is FromLines that panics on error. Only for tests and examples.
func MustFromLines(lines ...string) *Table {
	t, err := FromLines(lines...)
	if err != nil {
		panic(err)
	}
	return t
}

// trimmed returns b, or a copy of it when b has so much unused capacity
// that handing it to a table would keep much memory alive for nothing, as
// with a buffer that grew while reading.
func trimmed(b []byte) []byte {
	if cap(b)-len(b) > readSlack+len(b)/4 {
		return bytes.Clone(b)
	}
	return b
}

// parseOwned parses buf and takes it over, whatever the outcome: the strings
// of the table point into buf (no copy), and escaped fields are decoded in
// place. The caller must never write, reuse or parse buf again.
//
// Lines are split by hand (bufio.Scanner would cap line length; overlay
// lines can exceed 64 KiB). A typical line costs no allocation of its own:
// its strings are views of buf and its optional fields go to a shared pool.
func parseOwned(buf []byte) (*Table, error) {
	text := blockOf(buf)
	n := bytes.Count(buf, []byte{'\n'}) + 1 // at least the number of lines
	p := parser{
		mounts: make([]Mount, 0, n),
		index:  newPathIndex(n),
		pool:   stringPool{chunk: min(max(n, 8), 4096)},
	}
	p.slow.pool = &p.pool
	for lineNo := 1; len(buf) > 0; lineNo++ {
		line := buf
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			line, buf = buf[:i], buf[i+1:]
		} else {
			buf = nil
		}
		if len(line) == 0 {
			continue // a blank line carries no mount; the trailing one is normal
		}
		if err := p.line(line, lineNo); err != nil {
			return nil, err
		}
	}
	t := newTable(p.mounts, p.index)
	t.text = []textBlock{text}
	t.method = MethodMountinfo
	return t, nil
}

// parser fills the mounts and the unsorted path index of one table.
type parser struct {
	mounts []Mount
	index  pathIndex
	pool   stringPool
	slow   lineParser
}

// line parses one non-empty line into the next Mount, in place. The fast
// path handles every ordinary line; anything it does not accept is parsed
// again by the reference parser, which accepts or rejects it and names the
// error.
func (p *parser) line(line []byte, lineNo int) error {
	if len(p.mounts) == cap(p.mounts) { // not reached: parseOwned counted the lines
		p.mounts = append(p.mounts, Mount{})
	} else {
		p.mounts = p.mounts[:len(p.mounts)+1]
	}
	m := &p.mounts[len(p.mounts)-1]
	if !p.fast(m, line, lineNo) {
		var err error
		// The fast path left line untouched, and nothing writes it later.
		if *m, err = p.slow.parse(bytesView(line), lineNo); err != nil {
			return err
		}
	}
	// The mount point is still in the CPU cache: make its key now.
	p.index.add(m.MountPoint)
	return nil
}

// bytesView returns b as a string without copying. b must never be written
// again while the string is reachable.
func bytesView(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// span is the field line[lo:hi].
type span struct{ lo, hi int }

// maxFastTags is how many optional fields the fast path takes; a line with
// more goes to the reference parser.
const maxFastTags = 8

// fast parses an ordinary valid line into *m, which must be zero, and
// reports true. For any other line it reports false and has changed neither
// *m nor line. Whatever it accepts, lineParser accepts with the same result.
// Only once the whole line is known to be valid does it decode escapes, in
// place in line, before making strings that view line.
func (p *parser) fast(m *Mount, line []byte, lineNo int) bool {
	id, i, ok := number(line, 0, ' ', math.MaxInt32)
	if !ok {
		return false
	}
	parent, i, ok := number(line, i, ' ', math.MaxInt32)
	if !ok {
		return false
	}
	major, i, ok := number(line, i, ':', math.MaxUint32)
	if !ok {
		return false
	}
	minor, i, ok := number(line, i, ' ', math.MaxUint32)
	if !ok {
		return false
	}
	root, i, ok := field(line, i)
	if !ok || root.lo == root.hi {
		return false
	}
	mp, i, ok := field(line, i)
	if !ok || mp.lo == mp.hi {
		return false
	}
	opts, i, ok := field(line, i)
	if !ok || isDash(line, opts) {
		return false
	}
	var tags [maxFastTags]span
	ntags := 0
	for {
		var tag span
		if tag, i, ok = field(line, i); !ok {
			return false
		}
		if isDash(line, tag) {
			break
		}
		if tag.lo == tag.hi || ntags == len(tags) {
			return false
		}
		tags[ntags] = tag
		ntags++
	}
	fsType, i, ok := field(line, i)
	if !ok || fsType.lo == fsType.hi {
		return false
	}
	source, i, ok := field(line, i)
	if !ok || bytes.IndexByte(line[i:], ' ') >= 0 {
		return false // too few or too many fields after the separator
	}
	super := span{i, len(line)}

	// Valid. One scan tells whether any of the four fields needs decoding.
	if bytes.IndexByte(line[root.lo:source.hi], '\\') >= 0 {
		root.hi = root.lo + unescapeInPlace(line[root.lo:root.hi])
		mp.hi = mp.lo + unescapeInPlace(line[mp.lo:mp.hi])
		fsType.hi = fsType.lo + unescapeInPlace(line[fsType.lo:fsType.hi])
		source.hi = source.lo + unescapeInPlace(line[source.lo:source.hi])
	}
	m.Line = lineNo
	m.ID = int(id)
	m.ParentID = int(parent)
	m.Dev = DevID{Major: uint32(major), Minor: uint32(minor)}
	m.Root, m.Deleted = splitDeleted(bytesView(line[root.lo:root.hi]))
	m.MountPoint = bytesView(line[mp.lo:mp.hi])
	m.Options = bytesView(line[opts.lo:opts.hi])
	if ntags > 0 {
		f := p.pool.take(ntags)
		for k := range f {
			f[k] = bytesView(line[tags[k].lo:tags[k].hi])
		}
		m.OptionalFields = f
	}
	m.FSType = bytesView(line[fsType.lo:fsType.hi])
	m.Source = bytesView(line[source.lo:source.hi])
	m.SuperOptions = bytesView(line[super.lo:super.hi])
	return true
}

// deletedSuffix is what the kernel appends to the root field of a mount
// whose root dentry was unlinked (dentry_path in fs/d_path.c).
const deletedSuffix = "//deleted"

// splitDeleted strips the "//deleted" suffix from an unescaped root field
// and says whether it was there. The kernel never prints "//" inside a
// path, so the suffix cannot be a file named "deleted"; a root that is the
// suffix alone (no path before it) is no root the kernel prints, and is
// kept as it is.
func splitDeleted(root string) (string, bool) {
	p, ok := strings.CutSuffix(root, deletedSuffix)
	if !ok || p == "" {
		return root, false
	}
	return p, true // "///deleted" is "/"
}

// number parses the decimal digits from line[i] up to the byte stop, as
// parseDecimal would, and returns the value and the index after stop. It
// fails when stop does not follow.
func number(line []byte, i int, stop byte, max uint64) (uint64, int, bool) {
	start := i
	var v uint64
	for ; i < len(line) && line[i] != stop; i++ {
		d := uint64(line[i] - '0')
		if d > 9 {
			return 0, 0, false
		}
		if v = v*10 + d; v > max { // max < 2^32: no wrap-around
			return 0, 0, false
		}
	}
	if i == start || i == len(line) || i-start > 20 {
		return 0, 0, false
	}
	return v, i + 1, true
}

// field returns the field from line[i] up to the next space and the index
// after that space. It fails when no space follows.
func field(line []byte, i int) (span, int, bool) {
	j := bytes.IndexByte(line[i:], ' ')
	if j < 0 {
		return span{}, 0, false
	}
	return span{i, i + j}, i + j + 1, true
}

func isDash(line []byte, s span) bool { return s.hi-s.lo == 1 && line[s.lo] == '-' }

// stringPool hands out capacity-capped windows of shared string slices, so
// that the optional fields of a line cost no allocation of their own. A
// window never spans two chunks, and chunks are allocated, never grown, so
// nothing is copied.
type stringPool struct {
	free  []string
	chunk int
}

func (sp *stringPool) take(n int) []string {
	if n > len(sp.free) {
		sp.free = make([]string, max(sp.chunk, n))
	}
	w := sp.free[:n:n]
	sp.free = sp.free[n:]
	return w
}

// mark and release give back what take handed out since mark, for a line
// that is not kept.
func (sp *stringPool) mark() []string     { return sp.free }
func (sp *stringPool) release(m []string) { sp.free = m }

// lineParser is the reference parser: it parses one line at a time, field by
// field, and names the first field that is wrong. parseOwned uses it for the
// lines that its fast path does not take, to accept or reject them.
type lineParser struct {
	pool *stringPool
	tags []string // optional fields of the current line, reused
	rest string   // unread part of the line
	more bool     // whether rest still holds a field (it may be empty)
	line int
	err  *ParseError
}

// parse reads the fields of
// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER-OPTIONS.
func (p *lineParser) parse(line string, lineNo int) (Mount, error) {
	p.rest, p.more, p.line, p.err = line, true, lineNo, nil
	m := Mount{Line: lineNo}
	m.ID = p.id("mount ID")
	m.ParentID = p.id("parent ID")
	m.Dev = p.dev()
	m.Root, m.Deleted = splitDeleted(p.path("root"))
	m.MountPoint = p.path("mount point")
	m.Options = p.options()
	m.OptionalFields = p.optionalFields()
	m.FSType = unescape(p.nonEmpty("filesystem type"))
	m.Source = unescape(p.next("source")) // may be empty on some kernels
	m.SuperOptions = p.next("super options")
	if p.err == nil && p.more {
		p.fail("fields after separator", "more than 3")
	}
	if p.err != nil {
		return Mount{}, p.err
	}
	return m, nil
}

// fail records the first error of the line. Reasons are fixed texts: a
// field's value is never quoted because shifted fields can be options.
func (p *lineParser) fail(field, reason string) {
	if p.err == nil {
		p.err = &ParseError{Line: p.line, Field: field, Reason: reason}
	}
}

// next returns the next single-space separated field. The kernel separates
// fields by exactly one space and escapes spaces inside them, so an empty
// field (two spaces) is a real, empty value.
func (p *lineParser) next(field string) string {
	if p.err != nil {
		return ""
	}
	if !p.more {
		p.fail(field, "missing (too few fields)")
		return ""
	}
	i := strings.IndexByte(p.rest, ' ')
	if i < 0 {
		tok := p.rest
		p.rest, p.more = "", false
		return tok
	}
	tok := p.rest[:i]
	p.rest = p.rest[i+1:]
	return tok
}

func (p *lineParser) nonEmpty(field string) string {
	tok := p.next(field)
	if tok == "" {
		p.fail(field, "empty")
	}
	return tok
}

func (p *lineParser) path(field string) string {
	return unescape(p.nonEmpty(field))
}

func (p *lineParser) id(field string) int {
	v, ok := parseDecimal(p.nonEmpty(field), math.MaxInt32)
	if !ok {
		p.fail(field, "not a decimal number in range")
	}
	return int(v)
}

func (p *lineParser) dev() DevID {
	major, minor, found := strings.Cut(p.nonEmpty("major:minor"), ":")
	ma, okMa := parseDecimal(major, math.MaxUint32)
	mi, okMi := parseDecimal(minor, math.MaxUint32)
	if !found || !okMa || !okMi {
		p.fail("major:minor", "want two decimal numbers separated by ':'")
	}
	return DevID{Major: uint32(ma), Minor: uint32(mi)}
}

// options reads the per-mount options; "-" there means the line lacks them
// and the separator was reached too early.
func (p *lineParser) options() string {
	opts := p.next("mount options")
	if opts == "-" {
		p.fail("mount options", "missing (separator too early)")
	}
	return opts
}

// optionalFields reads tags up to and including the "-" separator. Unknown
// tags are kept: newer kernels may add some.
func (p *lineParser) optionalFields() []string {
	p.tags = p.tags[:0]
	for p.err == nil {
		tok := p.next("separator")
		if tok == "-" {
			break
		}
		if tok == "" && p.err == nil {
			p.fail("optional fields", "empty tag")
		}
		p.tags = append(p.tags, tok)
	}
	if p.err != nil || len(p.tags) == 0 {
		return nil
	}
	if p.pool == nil {
		p.pool = &stringPool{chunk: len(p.tags)}
	}
	f := p.pool.take(len(p.tags))
	copy(f, p.tags)
	return f
}

// parseDecimal parses an unsigned decimal number no greater than max. It is
// stricter than strconv (no sign, no underscores) and never allocates.
func parseDecimal(s string, max uint64) (uint64, bool) {
	if s == "" || len(s) > 20 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (max-uint64(c-'0'))/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}
