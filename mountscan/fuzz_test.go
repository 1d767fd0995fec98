package mountscan

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// Seed corpora of the fuzz targets are in testdata/fuzz/<FuzzName>/ (they
// run as regular tests under plain go test); the f.Add seeds below are the
// short, hand-written edge cases.

// escape writes s the way the kernel writes a mountinfo path.
func escape(s string) string {
	var b strings.Builder
	writeEscaped(&b, s)
	return b.String()
}

// FuzzParse: ParseBytes never panics, fails only with a *ParseError, and
// every entry it accepts, written back with Mount.String and parsed again,
// is the same entry (Line aside).
func FuzzParse(f *testing.F) {
	const (
		projected = `3614 3540 0:353 / /var/lib/kubelet/pods/7f3c/volumes/kubernetes.io~projected/kube-api-access-x rw,relatime shared:1201 master:7 - tmpfs tmpfs rw,size=1048576k,inode64`
		root      = `22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw,errors=remount-ro`
		noOpt     = `30 22 0:26 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw`
		nfs       = `40 22 0:50 /exp\040dir /mnt/my\040share rw,relatime shared:9 - nfs4 srv:/exp\040dir rw,vers=4.2,addr=10.0.0.2`
	)
	for _, s := range []string{projected, root, noOpt, nfs,
		root + "\n\n" + nfs + "\n", `1 0 8:1 /\134040 /a\011b rw - t\012 s\040 rw`,
		"50 22 0:60 / /mnt/x rw - tmpfs  rw", "36 35 98:0 / /m rw shared:1 ext3 /dev/x rw",
		"36 35 x:0 / /m rw - e /d rw", "\n\n", "1 0 8:1 / / rw a b c - t s o",
		"1 0 8:1 / /  - t s o", "1 0 8:1 / / rw - - - -", "007 00 0008:01 / / rw - t s ",
		`1 0 8:1 \000 \377 rw - \1 \99 \`, "1 0 4294967295:4294967295 / / rw - t s o",
		"2147483647 2147483648 0:0 / / rw - t s o", "1 0 8:1 / / rw\r - t s o\r"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ParseBytes(data)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error is %T, want *ParseError", err)
			}
			if _, serr := scopedParse(data, "/"); bytes.HasSuffix(data, []byte("\n")) && (serr == nil || serr.Error() != err.Error()) {
				t.Fatalf("scoped parse: %v, whole: %v", serr, err)
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
			line := FormatLine(m)
			if strings.Contains(line, "\n") {
				t.Fatalf("String of the entry of line %d holds a newline: %q", m.Line, line)
			}
			again, err := FromLines(line)
			if err != nil {
				t.Fatalf("re-parse of %q (from %q): %v", line, raw, err)
			}
			if again.Len() != 1 {
				t.Fatalf("re-parse of %q gave %d entries", line, again.Len())
			}
			m2 := again.Mounts()[0]
			m2.Line = m.Line
			if !reflect.DeepEqual(m, m2) {
				t.Fatalf("round trip of %q through %q changed the entry:\n%#v\n%#v", raw, line, m, m2)
			}
			if line2 := FormatLine(m2); line2 != line {
				t.Fatalf("String is not stable: %q, then %q", line, line2)
			}
		}
		checkScoped(t, data, tab)
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

// FuzzUnescape: unescape never grows its input or changes one without a
// backslash, and undoes the kernel's escaping of any string.
func FuzzUnescape(f *testing.F) {
	for _, s := range []string{"", "plain", `a\040b`, `\134040`, `\\`, `\0`, `\400`, `\377\000`, `x\`,
		"a b\tc\nd\\e", `\134\134`, `\1340`, "\xff\x00 \\"} {
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
		e := escape(s)
		if strings.ContainsAny(e, " \t\n") {
			t.Fatalf("escape(%q) = %q still holds a field or line separator", s, e)
		}
		if got := unescape(e); got != s {
			t.Fatalf("unescape(escape(%q)) = %q", s, got)
		}
		// Escaping what unescape produced gives a canonical form that
		// decodes to the same string.
		if got := unescape(escape(u)); got != u {
			t.Fatalf("unescape(escape(unescape(%q))) = %q, want %q", s, got, u)
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

func TestFormatLine(t *testing.T) {
	for _, line := range []string{
		`40 22 0:50 /exp\040dir /mnt/my\040share rw,relatime shared:9 master:2 - nfs4 srv:/exp\040dir rw,vers=4.2`,
		`1 0 8:1 /\134040 /a\011b rw - t\012 s\040 rw`,
		"50 22 0:60 / /mnt/x rw - tmpfs  rw",
		"1 0 8:1 / /  - t s ",
	} {
		m, err := FromLines(line)
		if err != nil {
			t.Fatal(err)
		}
		if got := FormatLine(m.Mounts()[0]); got != line {
			t.Errorf("FormatLine() = %q, want %q", got, line)
		}
	}
	// Non-canonical input is written back in the kernel's form.
	m := MustFromLines(`007 01 08:01 /a\101 /b\\c rw - t s o`).Mounts()[0]
	if got, want := FormatLine(m), `7 1 8:1 /aA /b\134\134c rw - t s o`; got != want {
		t.Errorf("FormatLine() = %q, want %q", got, want)
	}
}

// TestMountStringHasNoOptions: String is what ends up in logs, and mount
// options can hold credentials.
func TestMountStringHasNoOptions(t *testing.T) {
	m := MustFromLines(`40 22 0:50 / /mnt/share rw,relatime - cifs //srv/share rw,username=bob,password=hunter2`).Mounts()[0]
	got := m.String()
	if strings.Contains(got, "hunter2") || strings.Contains(got, "username") || strings.Contains(got, "relatime") {
		t.Errorf("String() = %q holds mount options", got)
	}
	if want := "/mnt/share (cifs from //srv/share, dev 0:50, root /, id 40)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// scopedParse parses data as a scoped read does, in chunks of 7 bytes (a
// longer line grows the buffer), so that lines straddle reads.
func scopedParse(data []byte, dirs ...string) (*scopedParser, error) {
	p := newScopedParser(NewScope(dirs...), false)
	if err := p.read(bytes.NewReader(bytes.Clone(data)), 7); err != nil {
		return nil, err
	}
	p.finish()
	return p, p.err
}

// checkScoped: a scoped parse of what ParseBytes accepted keeps exactly
// the entries in scope, equal to the whole parse's, whatever the chunks.
func checkScoped(t *testing.T, data []byte, whole *Table) {
	t.Helper()
	for _, dir := range []string{"/", "/var/lib/kubelet", "/mnt/my share"} {
		p, err := scopedParse(data, dir)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			if err == nil {
				t.Fatalf("scoped parse of a table without its last newline: no error")
			}
			continue
		}
		if err != nil {
			t.Fatalf("scoped parse within %s: %v", dir, err)
		}
		var want []Mount
		for _, m := range whole.Mounts() {
			if p.scope.keeps(treeKey(m.MountPoint)) {
				want = append(want, m)
			}
		}
		if !reflect.DeepEqual(want, p.mounts) && (len(want) > 0 || len(p.mounts) > 0) {
			t.Fatalf("scoped parse within %s:\n%#v\nwant\n%#v", dir, p.mounts, want)
		}
		if p.skipped+len(p.mounts) != whole.Len() {
			t.Fatalf("scoped parse within %s: %d kept + %d skipped, whole %d", dir, len(p.mounts), p.skipped, whole.Len())
		}
	}
}
