package mountscan

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	lineProjected = `3614 3540 0:353 / /var/lib/kubelet/pods/7f3c/volumes/kubernetes.io~projected/kube-api-access-x rw,relatime shared:1201 master:7 - tmpfs tmpfs rw,size=1048576k,inode64`
	lineRoot      = `22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw,errors=remount-ro`
	lineNoOpt     = `30 22 0:26 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw`
	lineNFS       = `40 22 0:50 /exp\040dir /mnt/my\040share rw,relatime shared:9 - nfs4 srv:/exp\040dir rw,vers=4.2,addr=10.0.0.2`
)

func parseOne(t *testing.T, line string) Mount {
	t.Helper()
	tab, err := FromLines(line)
	require.NoError(t, err)
	require.Equal(t, 1, tab.Len())
	return tab.Mounts()[0]
}

func TestParseAllFields(t *testing.T) {
	m := parseOne(t, lineProjected)
	assert.Equal(t, Mount{
		Line:           1,
		ID:             3614,
		ParentID:       3540,
		Dev:            DevID{Major: 0, Minor: 353},
		Root:           "/",
		MountPoint:     "/var/lib/kubelet/pods/7f3c/volumes/kubernetes.io~projected/kube-api-access-x",
		Options:        "rw,relatime",
		OptionalFields: []string{"shared:1201", "master:7"},
		FSType:         "tmpfs",
		Source:         "tmpfs",
		SuperOptions:   "rw,size=1048576k,inode64",
	}, m)
	assert.Equal(t, Propagation{Shared: 1201, Master: 7}, m.Propagation())
	assert.Equal(t, "0:353", m.Dev.String())
}

func TestParseOptionalFields(t *testing.T) {
	tests := []struct {
		name string
		opt  string // text between the mount options and the separator
		want []string
		prop Propagation
	}{
		{"none", "", nil, Propagation{}},
		{"shared", " shared:5", []string{"shared:5"}, Propagation{Shared: 5}},
		{"all known and an unknown tag", " shared:5 master:3 propagate_from:2 unbindable future:9",
			[]string{"shared:5", "master:3", "propagate_from:2", "unbindable", "future:9"},
			Propagation{Shared: 5, Master: 3, PropagateFrom: 2, Unbindable: true}},
		{"bad group number is ignored", " shared:x master:4", []string{"shared:x", "master:4"}, Propagation{Master: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := parseOne(t, "36 35 98:0 /r /m rw"+tt.opt+" - ext3 /dev/root rw")
			assert.Equal(t, tt.want, m.OptionalFields)
			assert.Equal(t, tt.prop, m.Propagation())
			assert.Equal(t, "ext3", m.FSType)
			assert.Equal(t, "/dev/root", m.Source)
		})
	}
}

func TestParseOptionalFieldsDoNotAlias(t *testing.T) {
	tab := MustFromLines(
		"1 0 8:1 / / rw shared:1 - ext4 /dev/sda1 rw",
		"2 1 8:2 / /a rw shared:2 master:1 - ext4 /dev/sda2 rw",
	)
	first := tab.Mounts()[0].OptionalFields
	require.Len(t, first, 1)
	assert.Equal(t, 1, cap(first), "appending to one entry's fields must not overwrite the next entry's")
	assert.Equal(t, []string{"shared:2", "master:1"}, tab.Mounts()[1].OptionalFields)
}

func TestParseEscapes(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`/mnt/a\040b`, "/mnt/a b"},
		{`/mnt/a\011b`, "/mnt/a\tb"},
		{`/mnt/a\012b`, "/mnt/a\nb"},
		{`/mnt/a\134b`, `/mnt/a\b`},
		{`/mnt/a\134040b`, `/mnt/a\040b`},
		{`/mnt/\040\040`, "/mnt/  "},
		{`/mnt/a\04`, `/mnt/a\04`},     // too short: kept
		{`/mnt/a\08x`, `/mnt/a\08x`},   // not octal: kept
		{`/mnt/a\400`, `/mnt/a\400`},   // above \377: kept
		{`/mnt/a\b\`, `/mnt/a\b\`},     // lone backslashes: kept
		{`/mnt/\101\102C`, "/mnt/ABC"}, // any octal escape
		{`/mnt/plain`, "/mnt/plain"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			m := parseOne(t, "1 0 8:1 "+tt.raw+" "+tt.raw+` rw - fuse\040x `+tt.raw+" rw")
			assert.Equal(t, tt.want, m.Root)
			assert.Equal(t, tt.want, m.MountPoint)
			assert.Equal(t, tt.want, m.Source)
			assert.Equal(t, "fuse x", m.FSType)
		})
	}
}

func TestParseSourceWithEscape(t *testing.T) {
	m := parseOne(t, lineNFS)
	assert.Equal(t, "srv:/exp dir", m.Source)
	assert.Equal(t, "/exp dir", m.Root)
	assert.Equal(t, "/mnt/my share", m.MountPoint)
}

func TestParseEmptySource(t *testing.T) {
	// Some kernels print an empty source: the fields after "-" are still 3.
	m := parseOne(t, "50 22 0:60 / /mnt/x rw - tmpfs  rw,size=4k")
	assert.Equal(t, "", m.Source)
	assert.Equal(t, "tmpfs", m.FSType)
	assert.Equal(t, "rw,size=4k", m.SuperOptions)
}

func TestParseLongLine(t *testing.T) {
	lower := "lowerdir=" + strings.Repeat("/var/lib/containerd/snapshots/123/fs:", 1536*1024/37)
	require.Greater(t, len(lower), 1536*1024-64)
	input := lineRoot + "\n" +
		"60 22 0:70 / /run/containerd/rootfs rw,relatime - overlay overlay rw," + lower + ",upperdir=/u\n" +
		lineNoOpt + "\n"
	tab, err := ParseBytes([]byte(input))
	require.NoError(t, err)
	require.Equal(t, 3, tab.Len())
	m := tab.Mounts()[1]
	assert.Equal(t, 2, m.Line)
	v, ok := m.SuperOption("upperdir")
	assert.True(t, ok)
	assert.Equal(t, "/u", v)
	assert.Equal(t, "/proc", tab.Mounts()[2].MountPoint)
}

func TestParseBlankLinesSkipped(t *testing.T) {
	tab, err := ParseBytes([]byte("\n" + lineRoot + "\n\n" + lineNoOpt + "\n"))
	require.NoError(t, err)
	require.Equal(t, 2, tab.Len())
	assert.Equal(t, 2, tab.Mounts()[0].Line, "line numbers count blank lines")
	assert.Equal(t, 4, tab.Mounts()[1].Line)

	empty, err := ParseBytes(nil)
	require.NoError(t, err)
	assert.Equal(t, 0, empty.Len())
}

func TestParseMalformed(t *testing.T) {
	tests := []struct {
		name, line, field string
	}{
		{"empty ID (leading space)", " 36 35 98:0 / /m rw - ext3 /dev/x rw", "mount ID"},
		{"bad ID", "x36 35 98:0 / /m rw - ext3 /dev/x rw", "mount ID"},
		{"negative ID", "-36 35 98:0 / /m rw - ext3 /dev/x rw", "mount ID"},
		{"ID overflow", "99999999999 35 98:0 / /m rw - ext3 /dev/x rw", "mount ID"},
		{"non-numeric parent", "36 p 98:0 / /m rw - ext3 /dev/x rw", "parent ID"},
		{"bad major:minor, no colon", "36 35 98 / /m rw - ext3 /dev/x rw", "major:minor"},
		{"bad major:minor, empty minor", "36 35 98: / /m rw - ext3 /dev/x rw", "major:minor"},
		{"bad major:minor, letters", "36 35 a:b / /m rw - ext3 /dev/x rw", "major:minor"},
		{"too few fields", "36 35 98:0 /r", "mount point"},
		{"only an ID", "36", "parent ID"},
		{"missing separator", "36 35 98:0 / /m rw shared:1 ext3 /dev/x rw", "separator"},
		{"separator instead of options", "36 35 98:0 / /m - ext3 /dev/x rw", "mount options"},
		{"empty optional tag", "36 35 98:0 / /m rw  shared:1 - ext3 /dev/x rw", "optional fields"},
		{"empty mount point", "36 35 98:0 /  rw - ext3 /dev/x rw", "mount point"},
		{"empty fstype", "36 35 98:0 / /m rw -  /dev/x rw", "filesystem type"},
		{"two fields after separator", "36 35 98:0 / /m rw - ext3 /dev/x", "super options"},
		{"four fields after separator", "36 35 98:0 / /m rw - ext3 /dev/x rw extra", "fields after separator"},
		{"trailing space", "36 35 98:0 / /m rw - ext3 /dev/x rw ", "fields after separator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A good first line and a blank line: the bad line is line 3.
			_, err := ParseBytes([]byte(lineRoot + "\n\n" + tt.line + "\n"))
			var perr *ParseError
			require.ErrorAs(t, err, &perr)
			assert.ErrorIs(t, err, ErrMalformed)
			assert.Equal(t, 3, perr.Line)
			assert.Equal(t, tt.field, perr.Field)
			assert.NotEmpty(t, perr.Reason)
		})
	}
}

func TestParseTruncatedFinalLine(t *testing.T) {
	full := lineRoot + "\n" + lineProjected
	cut := full[:len(full)-len(" rw,size=1048576k,inode64")]
	_, err := ParseBytes([]byte(cut))
	var perr *ParseError
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, 2, perr.Line)
	assert.Equal(t, "super options", perr.Field)
}

func TestParseErrorHidesSecrets(t *testing.T) {
	const secret = "hunter2-S3CR3T"
	lines := []string{
		"36 35 x:0 / /m rw,password=" + secret + " - cifs //srv/s rw,password=" + secret,
		"36 35 8:0 / /m rw,password=" + secret + " - cifs //srv/s rw,password=" + secret + " extra",
		"36 35 8:0 / /m password=" + secret + " cifs //srv/s rw,password=" + secret,
		"36 35 8:0 / /m " + secret + " -",
		secret + " 35 8:0 / /m rw - cifs //srv/s rw",
	}
	for i, line := range lines {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			_, err := FromLines(line)
			require.Error(t, err)
			assert.NotContains(t, err.Error(), secret)
			assert.NotContains(t, err.Error(), "password")

			_, err = ReadConsistent(t.Context(), "fake", func() ([]byte, error) { return []byte(line), nil }, 2)
			require.Error(t, err)
			assert.NotContains(t, err.Error(), secret)
			assert.True(t, errors.Is(err, ErrMalformed))
		})
	}
}

func TestMustFromLinesPanics(t *testing.T) {
	assert.Panics(t, func() { MustFromLines("bogus") })
}

func TestParseReader(t *testing.T) {
	tab, err := Parse(strings.NewReader(lineRoot + "\n" + lineNoOpt + "\n"))
	require.NoError(t, err)
	assert.Equal(t, 2, tab.Len())

	_, err = Parse(iotestErrReader{})
	assert.ErrorIs(t, err, errBoom)
}

var errBoom = errors.New("boom")

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errBoom }

func TestOptionLookup(t *testing.T) {
	m := Mount{
		Options:      "rw,nosuid,relatime",
		SuperOptions: `rw,context="system_u:object_r:container_file_t:s0:c0,c1",size=10k,mode=755,empty=`,
	}
	tests := []struct {
		key, want string
		found     bool
	}{
		{"context", "system_u:object_r:container_file_t:s0:c0,c1", true},
		{"size", "10k", true},
		{"mode", "755", true},
		{"empty", "", true},
		{"rw", "", true},
		{"c1\"", "", false},
		{"siz", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			v, ok := m.SuperOption(tt.key)
			assert.Equal(t, tt.found, ok)
			assert.Equal(t, tt.want, v)
		})
	}
	_, ok := m.MountOption("nosuid")
	assert.True(t, ok)
	_, ok = m.MountOption("size")
	assert.False(t, ok, "MountOption must not look at SuperOptions")
}

// The kernel appends "//deleted" to the root field of a mount whose root
// was unlinked (a block staging file bound from a device node that the
// storage layer deleted, failure-cases.md 37). It is no part of a path:
// Root is the path without it, Deleted says it was there, on the fast
// path and the reference parser alike (more optional fields than the fast
// path takes), and FormatLine writes it back.
func TestParseDeletedRoot(t *testing.T) {
	const staging = "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pvc-a/pvc-a"
	manyTags := " shared:2 master:1 t3 t4 t5 t6 t7 t8 t9"
	for _, c := range []struct {
		name, root, tags string
		want             string
		deleted          bool
	}{
		{"device node deleted", `/longhorn/pvc-a//deleted`, " shared:2", "/longhorn/pvc-a", true},
		{"reference parser", `/longhorn/pvc-a//deleted`, manyTags, "/longhorn/pvc-a", true},
		{"escaped name", `/my\040disk//deleted`, " shared:2", "/my disk", true},
		{"deleted root of its filesystem", `///deleted`, "", "/", true},
		{"a file named deleted", `/longhorn/deleted`, "", "/longhorn/deleted", false},
		{"the suffix alone is no root the kernel prints", `//deleted`, "", "//deleted", false},
		{"live", `/longhorn/pvc-a`, manyTags, "/longhorn/pvc-a", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			line := "900 29 0:5 " + c.root + " " + staging + " rw,nosuid" + c.tags + " - devtmpfs udev rw"
			m := parseOne(t, line)
			assert.Equal(t, c.want, m.Root)
			assert.Equal(t, c.deleted, m.Deleted)
			assert.Equal(t, line, FormatLine(m), "FormatLine writes the kernel's field back")
			if c.deleted {
				assert.NotContains(t, m.String(), "//deleted", "String never shows the suffix as a path")
				assert.Contains(t, m.String(), "(deleted)")
			}
		})
	}
}
