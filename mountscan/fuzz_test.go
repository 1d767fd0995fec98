package mountscan

import (
	"fmt"
	"strings"
	"testing"
)

// escape writes s the way the kernel writes a mountinfo path (see
// mangle() in fs/proc_namespace.c): space, tab, newline and backslash as
// three-digit octal escapes.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// format writes m as a mountinfo line.
func format(m Mount) string {
	opt := ""
	for _, f := range m.OptionalFields {
		opt += " " + f
	}
	return fmt.Sprintf("%d %d %d:%d %s %s %s%s - %s %s %s", m.ID, m.ParentID, m.Dev.Major, m.Dev.Minor,
		escape(m.Root), escape(m.MountPoint), m.Options, opt, escape(m.FSType), escape(m.Source), m.SuperOptions)
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{lineProjected, lineRoot, lineNoOpt, lineNFS,
		lineRoot + "\n\n" + lineNFS + "\n", `1 0 8:1 /\134040 /a\011b rw - t\012 s\040 rw`,
		"50 22 0:60 / /mnt/x rw - tmpfs  rw", "36 35 98:0 / /m rw shared:1 ext3 /dev/x rw",
		"36 35 x:0 / /m rw - e /d rw", "\n\n", "1 0 8:1 / / rw a b c - t s o"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ParseBytes(data)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error is %T, want *ParseError", err)
			}
			return
		}
		lines := strings.Split(string(data), "\n")
		for _, m := range tab.Mounts() {
			if m.Line <= 0 || m.Line > len(lines) {
				t.Fatalf("line %d out of range", m.Line)
			}
			raw := lines[m.Line-1]
			if n := len(m.Root) + len(m.MountPoint) + len(m.FSType) + len(m.Source); n > len(raw) {
				t.Fatalf("unescaped fields (%d bytes) longer than their line (%d bytes)", n, len(raw))
			}
			// Writing the entry back as the kernel would and parsing that
			// gives the same entry.
			again, err := FromLines(format(m))
			if err != nil {
				t.Fatalf("re-parse of %q: %v", format(m), err)
			}
			m2 := again.Mounts()[0]
			m2.Line = m.Line
			if fmt.Sprint(m2) != fmt.Sprint(m) {
				t.Fatalf("round trip changed the entry:\n%#v\n%#v", m, m2)
			}
		}
		// The indexes must be usable on whatever parsed.
		for _, m := range tab.Mounts() {
			if !tab.IsMountPoint(m.MountPoint) && strings.HasPrefix(m.MountPoint, "/") {
				t.Fatalf("entry at %q not found", m.MountPoint)
			}
			_ = tab.Refs(m.MountPoint)
			_ = tab.AtOrBelow(m.MountPoint)
		}
	})
}

func FuzzUnescape(f *testing.F) {
	for _, s := range []string{"", "plain", `a\040b`, `\134040`, `\\`, `\0`, `\400`, `\377\000`, `x\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u := unescape(s)
		if len(u) > len(s) {
			t.Fatalf("unescape grew %q to %q", s, u)
		}
		if !strings.Contains(s, `\`) && u != s {
			t.Fatalf("unescape changed %q without a backslash", s)
		}
		if got := unescape(escape(s)); got != s {
			t.Fatalf("unescape(escape(%q)) = %q", s, got)
		}
	})
}

func TestUnescapeNoAllocWithoutBackslash(t *testing.T) {
	s := strings.Repeat("/var/lib/kubelet/pods/x", 10)
	allocs := testing.AllocsPerRun(100, func() { _ = unescape(s) })
	if allocs != 0 {
		t.Fatalf("unescape allocated %v times for a string without backslash", allocs)
	}
}
