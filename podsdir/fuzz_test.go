//go:build unix

package podsdir_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/volrecon/volrecon/podsdir"
)

// Seed corpora are in testdata/fuzz/FuzzReadVolData: the vol_data.json
// variants found on nodes (pod-level, global with SELinux context, empty,
// truncated, an array, unknown keys, non-string values, too big for the
// default and for a small cap).

// volDataKeys maps each key ReadVolData knows to the field it fills.
var volDataKeys = map[string]func(*podsdir.VolData) string{
	"driverName":          func(v *podsdir.VolData) string { return v.DriverName },
	"volumeHandle":        func(v *podsdir.VolData) string { return v.VolumeHandle },
	"specVolID":           func(v *podsdir.VolData) string { return v.SpecVolID },
	"nodeName":            func(v *podsdir.VolData) string { return v.NodeName },
	"attachmentID":        func(v *podsdir.VolData) string { return v.AttachmentID },
	"volumeLifecycleMode": func(v *podsdir.VolData) string { return v.VolumeLifecycleMode },
	"seLinuxMountContext": func(v *podsdir.VolData) string {
		if v.SELinuxMountContext == nil {
			return ""
		}
		return *v.SELinuxMountContext
	},
}

// corruptReason is every Reason that ReadVolData documents for a regular
// file: fixed texts, key names, JSON kinds and byte offsets, and for a
// syntax error the one offending character (as encoding/json quotes it) --
// never more of the content.
var corruptReason = func() *regexp.Regexp {
	kind := `(?:object|array|string|number|boolean|null)`
	key := `"(?:driverName|volumeHandle|specVolID|nodeName|attachmentID|volumeLifecycleMode|seLinuxMountContext)"`
	keyProblem := `(?:key ` + key + ` is not a string \(` + kind + `\)|missing driverName|missing volumeHandle)`
	char := `'(?:[^\\']|\\'|\\[abfnrtv\\]|\\x[0-9a-f]{2}|\\u[0-9a-f]{4})'`
	context := `(?:looking for beginning of value|looking for beginning of object key string|after object key|` +
		`after object key:value pair|after array element|after top-level value|in string literal|in string escape code|` +
		`in \\u hexadecimal character escape|in numeric literal|after decimal point in numeric literal|` +
		`in exponent of numeric literal|in literal (?:true|false|null) \(expecting '[a-z]'\)|exceeded max depth|)`
	return regexp.MustCompile(`^(?:empty file|larger than [0-9]+ bytes|no JSON value \(only white space\)|` +
		`truncated JSON: unexpected EOF|JSON value is not an object \(` + kind + `\)|` +
		`invalid JSON at byte [0-9]+: invalid character ` + char + ` ` + context + `|` +
		keyProblem + `(?:; ` + keyProblem + `)*)$`)
}()

// fuzzTempDir returns a new temp dir, on tmpfs (/dev/shm) when there is
// one: the target writes a file per input.
func fuzzTempDir(tb testing.TB) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "volrecon-fuzz-"); err == nil {
			tb.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return tb.TempDir()
}

// FuzzReadVolData writes the fuzz bytes as a vol_data.json and reads it with
// a size cap of limit bytes (0: the default cap). ReadVolData must never
// panic; the file is OK exactly when its first JSON value is an object whose
// driverName and volumeHandle are non-empty strings and whose other known
// keys, if present, are strings; otherwise it is Corrupt with a Reason of
// the documented vocabulary, which quotes no more of the content than one
// offending character. Known keys with a string value are filled in either
// way, and nothing is read past the cap.
func FuzzReadVolData(f *testing.F) {
	for _, s := range []string{
		`{"driverName":"ebs.csi.aws.com","volumeHandle":"vol-0abc","specVolID":"pvc-1","nodeName":"n","attachmentID":"csi-1","volumeLifecycleMode":"Persistent"}`,
		``, ` `, `{`, `[]`, `null`, `"x"`, `1e400`, `{}`, `{"driverName":"d","volumeHandle":"h"} trailing`,
		`{"driverName":"d","volumeHandle":"h","driverName":7}`, `{"driverName":"d\u0000","volumeHandle":"\ud800"}`,
		`{"driverName" "d"}`, "{\"driverName\":\"d\xff\",\"volumeHandle\":\"h\"}", `{"driverName":"d","volumeHandle":"h","x":1e999}`,
	} {
		f.Add([]byte(s), uint16(0))
	}
	f.Add([]byte(`{"driverName":"d","volumeHandle":"h"}`), uint16(len(`{"driverName":"d","volumeHandle":"h"}`)))
	f.Add([]byte(`{"driverName":"d","volumeHandle":"h"}`), uint16(len(`{"driverName":"d","volumeHandle":"h"}`)-1))

	const p = "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/vol_data.json"
	root := fuzzTempDir(f)
	dir := filepath.Join(root, filepath.Dir(p))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, content []byte, limit uint16) {
		// Each fuzz worker is a process of its own that runs its inputs one
		// at a time, so one file in the shared dir is enough.
		if err := os.WriteFile(filepath.Join(root, p), content, 0o644); err != nil {
			t.Fatal(err)
		}
		vd := podsdir.Options{HostRoot: root, MaxVolDataSize: int64(limit)}.ReadVolData(p)

		if vd.Path != p {
			t.Fatalf("Path %q, want %q", vd.Path, p)
		}
		max := int64(limit)
		if max == 0 {
			max = podsdir.DefaultMaxVolDataSize
		}
		if int64(len(content)) > max {
			want := podsdir.VolData{Path: p, State: podsdir.VolDataCorrupt, Reason: fmt.Sprintf("larger than %d bytes", max)}
			if vd != want {
				t.Fatalf("%d bytes over a cap of %d: got %+v, want %+v", len(content), max, vd, want)
			}
			return
		}

		ok, fields := expectVolData(content)
		switch {
		case ok && vd.State != podsdir.VolDataOK:
			t.Fatalf("valid vol_data.json %q read as %s: %s", content, vd.State, vd.Reason)
		case !ok && vd.State != podsdir.VolDataCorrupt:
			t.Fatalf("invalid vol_data.json %q read as %s, want Corrupt", content, vd.State)
		case ok && vd.Reason != "":
			t.Fatalf("OK with a reason: %q", vd.Reason)
		case !ok && vd.Reason == "":
			t.Fatalf("Corrupt %q without a reason", content)
		case !ok && !corruptReason.MatchString(vd.Reason):
			t.Fatalf("reason %q of %q is not one ReadVolData documents (it may quote the content)", vd.Reason, content)
		}
		for key, get := range volDataKeys {
			want, isString := fields[key]
			if got := get(&vd); isString && got != want || !isString && got != "" {
				t.Fatalf("key %s: got %q, want %q (present as a string: %v) from %q", key, got, want, isString, content)
			}
		}
	})
}

// expectVolData decodes the first JSON value of content the way the
// kubelet's reader does and says whether it is a usable vol_data.json. fields
// holds the known keys whose value is a string.
func expectVolData(content []byte) (ok bool, fields map[string]string) {
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.UseNumber() // any valid number, however large, is a value
	var v any
	if err := dec.Decode(&v); err != nil {
		return false, nil
	}
	obj, isObject := v.(map[string]any)
	if !isObject {
		return false, nil
	}
	fields = map[string]string{}
	ok = true
	for key := range volDataKeys {
		val, present := obj[key]
		if !present {
			continue
		}
		s, isString := val.(string)
		if !isString {
			ok = false
			continue
		}
		fields[key] = s
	}
	return ok && fields["driverName"] != "" && fields["volumeHandle"] != "", fields
}

func TestCorruptReasonVocabulary(t *testing.T) {
	for _, r := range []string{
		"empty file", "larger than 65536 bytes", "no JSON value (only white space)", "truncated JSON: unexpected EOF",
		"JSON value is not an object (array)", `invalid JSON at byte 15: invalid character '"' after object key`,
		`invalid JSON at byte 1: invalid character '\x00' looking for beginning of value`,
		`key "nodeName" is not a string (number); key "attachmentID" is not a string (null)`,
		`key "driverName" is not a string (array); missing driverName`, "missing driverName; missing volumeHandle",
	} {
		if !corruptReason.MatchString(r) {
			t.Errorf("documented reason %q not matched", r)
		}
	}
	for _, r := range []string{
		"", "invalid JSON: secret", `invalid JSON at byte 3: invalid character 'abc' after object key`,
		`key "password" is not a string (string)`, "missing driverName; ",
	} {
		if corruptReason.MatchString(r) {
			t.Errorf("reason %q matched", r)
		}
	}
	if strings.Contains(corruptReason.String(), "invalid JSON: ") {
		t.Error("the generic decoder error, which may quote content, must not be accepted")
	}
}
