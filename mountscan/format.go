package mountscan

import (
	"strconv"
	"strings"
)

// String describes m for people and logs: mount point, type, source,
// device, root and ID. It never includes the mount options, which can be
// secrets (e.g. CIFS or Ceph credentials).
func (m Mount) String() string {
	return m.MountPoint + " (" + m.FSType + " from " + m.Source + ", dev " + m.Dev.String() +
		", root " + m.Root + deletedNote(m.Deleted) + ", id " + strconv.Itoa(m.ID) + ")"
}

// deletedNote says in words that a mount's root was unlinked.
func deletedNote(deleted bool) string {
	if deleted {
		return " (deleted)"
	}
	return ""
}

// FormatLine writes m back as one mountinfo line, without a trailing
// newline, in the kernel's format, for writing mount tables (fixtures,
// generators, tests):
//
//	ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER-OPTIONS
//
// Root, MountPoint, FSType and Source get the escapes the kernel writes
// (mangle() in fs/proc_namespace.c): space, tab, newline and backslash
// become \040, \011, \012 and \134; every other byte is written as it is.
// Options, OptionalFields and SuperOptions are written raw, as they are
// stored. A Deleted mount's root gets the kernel's "//deleted" suffix back.
// Line is not part of the output.
//
// For every Mount returned by Parse, ParseBytes or FromLines, parsing the
// output again gives an equal Mount (Line aside). A Mount built by hand
// gives a line that parses only if its fields are valid: non-negative IDs;
// non-empty Root, MountPoint and FSType; Options other than "-"; optional
// fields that are neither empty nor "-"; and no space or newline in
// Options, OptionalFields or SuperOptions, which are not escaped.
//
// The line holds the mount options, which can be secrets: unlike String,
// it must never be logged or put into an error.
func FormatLine(m Mount) string {
	var b strings.Builder
	b.Grow(64 + len(m.Root) + len(m.MountPoint) + len(m.Options) + len(m.FSType) + len(m.Source) + len(m.SuperOptions))
	var num [20]byte
	b.Write(strconv.AppendInt(num[:0], int64(m.ID), 10))
	b.WriteByte(' ')
	b.Write(strconv.AppendInt(num[:0], int64(m.ParentID), 10))
	b.WriteByte(' ')
	b.Write(strconv.AppendUint(num[:0], uint64(m.Dev.Major), 10))
	b.WriteByte(':')
	b.Write(strconv.AppendUint(num[:0], uint64(m.Dev.Minor), 10))
	b.WriteByte(' ')
	writeEscaped(&b, m.Root)
	if m.Deleted {
		b.WriteString(deletedSuffix)
	}
	b.WriteByte(' ')
	writeEscaped(&b, m.MountPoint)
	b.WriteByte(' ')
	b.WriteString(m.Options)
	for _, f := range m.OptionalFields {
		b.WriteByte(' ')
		b.WriteString(f)
	}
	b.WriteString(" - ")
	writeEscaped(&b, m.FSType)
	b.WriteByte(' ')
	writeEscaped(&b, m.Source)
	b.WriteByte(' ')
	b.WriteString(m.SuperOptions)
	return b.String()
}

// writeEscaped writes s to b with the kernel's mountinfo escapes: space,
// tab, newline and backslash as a backslash and three octal digits. It is
// the inverse of unescape for every s.
func writeEscaped(b *strings.Builder, s string) {
	for {
		i := strings.IndexAny(s, " \t\n\\")
		if i < 0 {
			b.WriteString(s)
			return
		}
		b.WriteString(s[:i])
		c := s[i]
		b.Write([]byte{'\\', '0' + c>>6, '0' + c>>3&7, '0' + c&7})
		s = s[i+1:]
	}
}
