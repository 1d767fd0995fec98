package mountscan

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Parse reads all of r once and parses it as mountinfo. It makes no
// consistency check: use ReadFile for a live mount table.
func Parse(r io.Reader) (*Table, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return ParseBytes(b)
}

// ParseBytes parses a whole mountinfo file. Empty lines are skipped (line
// numbers still count them); any other line that is not a valid mountinfo
// line makes it fail with a *ParseError. The strings of the returned table
// share one copy of b: b may be reused afterwards, and holding any Mount
// keeps that copy alive.
func ParseBytes(b []byte) (*Table, error) {
	mounts, index, err := parseAll(string(b))
	if err != nil {
		return nil, err
	}
	return newTable(mounts, index), nil
}

// FromLines parses literal mountinfo lines, as tests and examples write them.
func FromLines(lines ...string) (*Table, error) {
	return ParseBytes([]byte(strings.Join(lines, "\n")))
}

// MustFromLines is FromLines that panics on error. Only for tests and examples.
func MustFromLines(lines ...string) *Table {
	t, err := FromLines(lines...)
	if err != nil {
		panic(err)
	}
	return t
}

// parseAll splits s into lines by hand (bufio.Scanner would cap line length;
// overlay lines can exceed 64 KiB). Every string it returns is a substring of
// s, except fields that needed unescaping, so a typical line costs no
// allocation of its own.
func parseAll(s string) ([]Mount, *pathIndex, error) {
	n := strings.Count(s, "\n") + 1
	mounts := make([]Mount, 0, n)
	p := lineParser{pool: make([]string, 0, n)}
	index := newPathIndex(n, len(s)/4) // mount points are a good part of a line
	for lineNo := 1; s != ""; lineNo++ {
		var line string
		line, s, _ = strings.Cut(s, "\n")
		if line == "" {
			continue // a blank line carries no mount; the trailing one is normal
		}
		m, err := p.parse(line, lineNo)
		if err != nil {
			return nil, nil, err
		}
		mounts = append(mounts, m)
		index.add(m.MountPoint)
	}
	return mounts, index, nil
}

// lineParser parses one line at a time. Optional fields of all lines are
// appended to one pool and each Mount gets a capacity-capped window of it,
// which saves an allocation per line.
type lineParser struct {
	pool []string
	rest string // unread part of the line
	more bool   // whether rest still holds a field (it may be empty)
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
	m.Root = p.path("root")
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
	start := len(p.pool)
	for p.err == nil {
		tok := p.next("separator")
		if tok == "-" {
			break
		}
		if tok == "" && p.err == nil {
			p.fail("optional fields", "empty tag")
		}
		p.pool = append(p.pool, tok)
	}
	if p.err != nil || len(p.pool) == start {
		p.pool = p.pool[:start]
		return nil
	}
	return p.pool[start:len(p.pool):len(p.pool)]
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
