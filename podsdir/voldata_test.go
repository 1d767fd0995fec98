//go:build unix

package podsdir

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestReadVolData(t *testing.T) {
	const p = "/dir/vol_data.json"
	tests := []struct {
		name    string
		spec    []string // tree; the file under test is p
		content *string  // if set, p is a file with this content (may hold newlines)
		max     int64
		want    VolData // Path is filled in
	}{
		{
			name:    "pod file",
			content: ptr(podVolData),
			want:    VolData{VolDataKeys: VolDataKeys{DriverName: "ebs.csi.aws.com", VolumeHandle: "vol-0abc", SpecVolID: "pvc-1234", NodeName: "node-a", AttachmentID: "csi-5f2c", VolumeLifecycleMode: "Persistent"}, State: VolDataOK},
		},
		{
			name:    "global file with SELinux context, pretty printed",
			content: ptr("{\n  \"driverName\": \"d\",\n  \"volumeHandle\": \"h\",\n  \"seLinuxMountContext\": \"system_u:object_r:container_file_t:s0:c0,c1\"\n}\n"),
			want:    VolData{VolDataKeys: VolDataKeys{DriverName: "d", VolumeHandle: "h", SELinuxMountContext: ptr("system_u:object_r:container_file_t:s0:c0,c1")}, State: VolDataOK},
		},
		{
			name:    "SELinux context present but empty: kept apart from absent (kubernetes#133424)",
			content: ptr(`{"driverName":"d","volumeHandle":"h","seLinuxMountContext":""}`),
			want:    VolData{VolDataKeys: VolDataKeys{DriverName: "d", VolumeHandle: "h", SELinuxMountContext: ptr("")}, State: VolDataOK},
		},
		{
			name:    "SELinux context present but empty, through the full decoder",
			content: ptr(`{"driverName":"d\u0041","volumeHandle":"h","seLinuxMountContext":""}`),
			want:    VolData{VolDataKeys: VolDataKeys{DriverName: "dA", VolumeHandle: "h", SELinuxMountContext: ptr("")}, State: VolDataOK},
		},
		{
			name:    "unknown keys tolerated, whatever their value",
			content: ptr(`{"driverName":"d","volumeHandle":"h","sourceKind":"x","driverMode":{"a":[1,2]},"n":1}`),
			want:    VolData{VolDataKeys: VolDataKeys{DriverName: "d", VolumeHandle: "h"}, State: VolDataOK},
		},
		{
			name:    "trailing data after the object is ignored, like the kubelet",
			content: ptr(`{"driverName":"d","volumeHandle":"h"}` + "\n" + `garbage`),
			want:    VolData{VolDataKeys: VolDataKeys{DriverName: "d", VolumeHandle: "h"}, State: VolDataOK},
		},
		{
			name: "missing",
			spec: []string{"d /dir"},
			want: VolData{State: VolDataMissing},
		},
		{
			name: "parent missing",
			want: VolData{State: VolDataMissing},
		},
		{
			name: "parent is a file",
			spec: []string{"f /dir x"},
			want: VolData{State: VolDataMissing},
		},
		{
			name:    "zero bytes",
			content: ptr(""),
			want:    VolData{State: VolDataCorrupt, Reason: "empty file"},
		},
		{
			name:    "only white space",
			content: ptr(" \n"),
			want:    VolData{State: VolDataCorrupt, Reason: "no JSON value (only white space)"},
		},
		{
			name:    "truncated",
			content: ptr(`{"driverName":"ebs.csi.aws.com","volumeHa`),
			want:    VolData{State: VolDataCorrupt, Reason: "truncated JSON: unexpected EOF"},
		},
		{
			name:    "syntax error",
			content: ptr(`{"driverName" "d"}`),
			want:    VolData{State: VolDataCorrupt, Reason: "invalid JSON at byte 15: invalid character '\"' after object key"},
		},
		{
			name:    "array",
			content: ptr(`[]`),
			want:    VolData{State: VolDataCorrupt, Reason: "JSON value is not an object (array)"},
		},
		{
			name:    "string",
			content: ptr(`"x"`),
			want:    VolData{State: VolDataCorrupt, Reason: "JSON value is not an object (string)"},
		},
		{
			name:    "null",
			content: ptr(`null`),
			want:    VolData{State: VolDataCorrupt, Reason: "JSON value is not an object (null)"},
		},
		{
			name:    "missing driverName, other keys still filled",
			content: ptr(`{"volumeHandle":"h","specVolID":"pv"}`),
			want:    VolData{VolDataKeys: VolDataKeys{VolumeHandle: "h", SpecVolID: "pv"}, State: VolDataCorrupt, Reason: "missing driverName"},
		},
		{
			name:    "empty volumeHandle",
			content: ptr(`{"driverName":"d","volumeHandle":""}`),
			want:    VolData{VolDataKeys: VolDataKeys{DriverName: "d"}, State: VolDataCorrupt, Reason: "missing volumeHandle"},
		},
		{
			name:    "empty object",
			content: ptr(`{}`),
			want:    VolData{State: VolDataCorrupt, Reason: "missing driverName; missing volumeHandle"},
		},
		{
			name:    "non-string values of known keys",
			content: ptr(`{"driverName":"d","volumeHandle":"h","nodeName":7,"attachmentID":null}`),
			want:    VolData{VolDataKeys: VolDataKeys{DriverName: "d", VolumeHandle: "h"}, State: VolDataCorrupt, Reason: `key "nodeName" is not a string (number); key "attachmentID" is not a string (null)`},
		},
		{
			name:    "non-string driverName",
			content: ptr(`{"driverName":["d"],"volumeHandle":"h"}`),
			want:    VolData{VolDataKeys: VolDataKeys{VolumeHandle: "h"}, State: VolDataCorrupt, Reason: `key "driverName" is not a string (array); missing driverName`},
		},
		{
			name:    "too big",
			content: ptr(`{"driverName":"d","volumeHandle":"h","specVolID":"0123456789"}`),
			max:     32,
			want:    VolData{State: VolDataCorrupt, Reason: "larger than 32 bytes"},
		},
		{
			name:    "exactly the limit",
			content: ptr(`{"driverName":"d","volumeHandle":"h"}`),
			max:     int64(len(`{"driverName":"d","volumeHandle":"h"}`)),
			want:    VolData{VolDataKeys: VolDataKeys{DriverName: "d", VolumeHandle: "h"}, State: VolDataOK},
		},
		{
			name: "symlink to a valid file is not followed",
			spec: []string{"f /other.json " + stagingVolData, "l " + p + " /other.json"},
			want: VolData{State: VolDataCorrupt, Reason: "is a symlink, not followed"},
		},
		{
			name: "directory",
			spec: []string{"d " + p},
			want: VolData{State: VolDataCorrupt, Reason: "is a directory, not a regular file"},
		},
		{
			name: "FIFO is not opened",
			spec: []string{"p " + p},
			want: VolData{State: VolDataCorrupt, Reason: "is a special file (socket, device or FIFO), not a regular file"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := build(t, tc.spec...)
			if tc.content != nil {
				require.NoError(t, os.MkdirAll(filepath.Join(root, "dir"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(root, p), []byte(*tc.content), 0o644))
			}
			got := Options{HostRoot: root, MaxVolDataSize: tc.max}.ReadVolData(p)
			want := tc.want
			want.Path = p
			assert.Equal(t, want, got)
			if tc.content != nil && len(*tc.content) > 3 {
				assert.NotContains(t, got.Reason, "ebs.csi", "reasons never quote the content")
			}
		})
	}
}

func TestReadVolDataDefaultLimit(t *testing.T) {
	root := t.TempDir()
	// A valid object padded with white space to just over the default limit.
	obj := `{"driverName":"d","volumeHandle":"h"}`
	big := obj + strings.Repeat(" ", DefaultMaxVolDataSize-len(obj)+1)
	require.NoError(t, os.WriteFile(filepath.Join(root, "big.json"), []byte(big), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "fits.json"), []byte(big[:DefaultMaxVolDataSize]), 0o644))
	o := Options{HostRoot: root}
	assert.Equal(t, VolData{Path: "/big.json", State: VolDataCorrupt, Reason: "larger than 65536 bytes"}, o.ReadVolData("/big.json"))
	assert.Equal(t, VolDataOK, o.ReadVolData("/fits.json").State)
}

func TestReadVolDataUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: permission checks are bypassed, so a mode-000 file is still readable")
	}
	root := build(t, "f /vol_data.json "+stagingVolData)
	require.NoError(t, os.Chmod(filepath.Join(root, "vol_data.json"), 0))
	got := Options{HostRoot: root}.ReadVolData("/vol_data.json")
	assert.Equal(t, VolData{Path: "/vol_data.json", State: VolDataCorrupt, Reason: "unreadable: permission denied"}, got)
}

func ptr[T any](v T) *T { return &v }

// plainJSONString agrees with json.Unmarshal wherever it answers, and
// declines what needs the full decoder.
func TestPlainJSONString(t *testing.T) {
	for _, in := range []string{`""`, `"vol-0abc"`, `"ebs.csi.aws.com"`, `"a b/c:d"`, `"é"`, `"a\"b"`, `"a\\nb"`, `"\u0041"`, "\"a\tb\"", `"x`, `x"`, `"`} {
		got, ok := plainJSONString(json.RawMessage(in))
		var want string
		err := json.Unmarshal([]byte(in), &want)
		if ok {
			require.NoError(t, err, in)
			assert.Equal(t, want, got, in)
		}
		plain := !strings.ContainsAny(in[1:max(1, len(in)-1)], "\\\"é\t")
		assert.Equal(t, plain && err == nil, ok, in)
	}
}

// plainVolDataInputs are contents on either side of what the one-pass
// decoder takes.
var plainVolDataInputs = []string{
	podVolData, stagingVolData, `{}`, ` { } `, `{"driverName":"d","volumeHandle":"h"}trailing`,
	"{\n  \"driverName\" : \"d\",\r\n\t\"volumeHandle\":\"h\"\n}\n", `{"driverName":"a","driverName":""}`,
	`{"driverName":"d","volumeHandle":"h","unknown":"x"}`, `{"Drivername":"d"}`,
	// Not plain: the full decoder decides.
	`{"driverName":"d","volumeHandle":"h","n":1}`, `{"driverName":"d\n"}`, `{"driverName":"d\u0041"}`, `{"driverName":"é"}`,
	`{"driverName":"d",}`, `{"driverName":"d"`, `{"driverName":"d" "x"}`, `{"driverName":"d"]`, `{"driverName":"d",`,
	`{"driverName"}`, `{"driverName":}`, `{,}`, `{"a":"b"} {`, "\xef\xbb\xbf{}", `[{}]`, `{"a":{"b":"c"}}`, `{"driverName":null}`,
	`{"driverName":"x","driverName":7}`, `{"driverName":7,"driverName":"x"}`, `{"k\"":"v"}`, ``, ` `, `{`, `{"`,
}

// The one-pass decoder reads what it takes exactly as encoding/json does,
// and takes the shape the kubelet writes.
func TestDecodePlainVolDataAgrees(t *testing.T) {
	for _, in := range plainVolDataInputs {
		checkPlainVolData(t, []byte(in))
	}
	for _, in := range []string{podVolData, stagingVolData, `{}`, `{"driverName":"a","driverName":""}`, `{"a":"b"} {`} {
		assert.True(t, decodePlainVolData(&VolData{}, []byte(in)), "plain: %q", in)
	}
	for _, in := range []string{`{"n":1}`, `{"driverName":"d",}`, `{"driverName":"é"}`, `{"a":"b"`, `[]`} {
		assert.False(t, decodePlainVolData(&VolData{}, []byte(in)), "not plain: %q", in)
	}
}

func FuzzDecodePlainVolData(f *testing.F) {
	for _, in := range plainVolDataInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(checkPlainVolData)
}

func checkPlainVolData(t *testing.T, data []byte) {
	full := decodeVolData(VolData{Path: "/p"}, data)
	got := parseVolData(VolData{Path: "/p"}, data)
	if got != full {
		t.Fatalf("%q: one pass %+v, encoding/json %+v", data, got, full)
	}
}

// The buffer handed to readVolData is reused, grown when a file needs it;
// what it read is the file's, never what an earlier file left there.
func TestReadVolDataReusesTheBuffer(t *testing.T) {
	big := `{"driverName":"d","volumeHandle":"` + strings.Repeat("h", 3000) + `"}`
	root := build(t, "f /big.json "+big, "f /small.json "+`{"driverName":"e","volumeHandle":"i"}`,
		"f /empty.json ", "p /fifo.json", "l /link.json /small.json")
	o := Options{HostRoot: root}
	var buf []byte
	var vd VolData
	vd, buf = o.readVolData("/big.json", at{unix.AT_FDCWD, root + "/big.json"}, true, buf)
	assert.Equal(t, strings.Repeat("h", 3000), vd.VolumeHandle)
	require.GreaterOrEqual(t, cap(buf), len(big))
	grown := &buf[:1][0]
	vd, buf = o.readVolData("/small.json", at{unix.AT_FDCWD, root + "/small.json"}, true, buf)
	assert.Equal(t, VolData{VolDataKeys: VolDataKeys{DriverName: "e", VolumeHandle: "i"}, Path: "/small.json", State: VolDataOK}, vd)
	assert.Same(t, grown, &buf[:1][0], "the buffer is reused")
	vd, buf = o.readVolData("/empty.json", at{unix.AT_FDCWD, root + "/empty.json"}, true, buf)
	assert.Equal(t, "empty file", vd.Reason)
	// Listed as a regular file, swapped for a FIFO or a symlink since: the
	// open neither blocks nor follows, and the fstat tells.
	vd, buf = o.readVolData("/fifo.json", at{unix.AT_FDCWD, root + "/fifo.json"}, true, buf)
	assert.Equal(t, "is a special file (socket, device or FIFO), not a regular file", vd.Reason)
	vd, _ = o.readVolData("/link.json", at{unix.AT_FDCWD, root + "/link.json"}, true, buf)
	assert.Equal(t, "is a symlink, not followed", vd.Reason)
}
