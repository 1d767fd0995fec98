//go:build unix

package podsdir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"
)

// volDataFile is the name of the CSI metadata file.
const volDataFile = "vol_data.json"

// ReadVolData reads a vol_data.json at host path p (never following a
// symlink), capped at MaxVolDataSize bytes.
//
// It never fails: an absent file is State Missing, anything that cannot be
// used is State Corrupt with a Reason that names what was wrong (never the
// file's content). Keys that were present and well formed are filled in
// even when the file is Corrupt, e.g. for a missing driverName.
//
// Like the kubelet's reader, it decodes the first JSON value and ignores
// anything after it, and it ignores unknown keys (whatever their values).
// Unlike the kubelet it reports a known key with a non-string value
// (including null) as Corrupt.
func (o Options) ReadVolData(p string) VolData {
	vd := VolData{Path: p}
	hp := o.HostPath(p)
	// Lstat first so that a device node or FIFO is never opened.
	fi, err := os.Lstat(hp)
	if err != nil {
		return volDataOpenError(vd, err)
	}
	if reason := notRegularReason(fi.Mode()); reason != "" {
		return corruptVolData(vd, reason)
	}
	// O_NOFOLLOW and O_NONBLOCK: if the file was swapped for a symlink or a
	// FIFO since the Lstat, the open neither follows it nor blocks.
	f, err := os.OpenFile(hp, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return volDataOpenError(vd, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return corruptVolData(vd, "unreadable: "+errText(err))
	}
	if reason := notRegularReason(fi.Mode()); reason != "" {
		return corruptVolData(vd, reason)
	}
	limit := o.maxVolDataSize()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return corruptVolData(vd, "unreadable: "+errText(err))
	}
	if int64(len(data)) > limit {
		return corruptVolData(vd, fmt.Sprintf("larger than %d bytes", limit))
	}
	if len(data) == 0 {
		return corruptVolData(vd, "empty file")
	}
	return parseVolData(vd, data)
}

func corruptVolData(vd VolData, reason string) VolData {
	vd.State = VolDataCorrupt
	vd.Reason = reason
	return vd
}

func volDataOpenError(vd VolData, err error) VolData {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		vd.State = VolDataMissing
		return vd
	case errors.Is(err, syscall.ELOOP):
		return corruptVolData(vd, reasonSymlink)
	}
	return corruptVolData(vd, "unreadable: "+errText(err))
}

const reasonSymlink = "is a symlink, not followed"

// notRegularReason says why a file of mode m cannot be a vol_data.json, or "".
func notRegularReason(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return ""
	case m&fs.ModeSymlink != 0:
		return reasonSymlink
	case m.IsDir():
		return "is a directory, not a regular file"
	}
	return "is a " + describeType(EntryTypeOf(m)) + ", not a regular file"
}

// volDataKeys lists the known keys in a fixed order, so that reasons are deterministic.
func volDataKeys(vd *VolData) []struct {
	name string
	dst  *string
} {
	return []struct {
		name string
		dst  *string
	}{
		{"driverName", &vd.DriverName},
		{"volumeHandle", &vd.VolumeHandle},
		{"specVolID", &vd.SpecVolID},
		{"nodeName", &vd.NodeName},
		{"attachmentID", &vd.AttachmentID},
		{"volumeLifecycleMode", &vd.VolumeLifecycleMode},
		{"seLinuxMountContext", &vd.SELinuxMountContext},
	}
}

// parseVolData decodes data into vd and sets State and Reason.
func parseVolData(vd VolData, data []byte) VolData {
	var raw json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&raw); err != nil {
		return corruptVolData(vd, jsonErrorReason(err))
	}
	if kind := jsonKind(raw); kind != "object" {
		return corruptVolData(vd, "JSON value is not an object ("+kind+")")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return corruptVolData(vd, jsonErrorReason(err))
	}
	var reasons []string
	for _, k := range volDataKeys(&vd) {
		v, ok := fields[k.name]
		if !ok {
			continue
		}
		if kind := jsonKind(v); kind != "string" {
			reasons = append(reasons, fmt.Sprintf("key %q is not a string (%s)", k.name, kind))
			continue
		}
		if plain, ok := plainJSONString(v); ok {
			*k.dst = plain
			continue
		}
		if err := json.Unmarshal(v, k.dst); err != nil {
			reasons = append(reasons, fmt.Sprintf("key %q: %s", k.name, jsonErrorReason(err)))
		}
	}
	if vd.DriverName == "" {
		reasons = append(reasons, "missing driverName")
	}
	if vd.VolumeHandle == "" {
		reasons = append(reasons, "missing volumeHandle")
	}
	if len(reasons) > 0 {
		return corruptVolData(vd, strings.Join(reasons, "; "))
	}
	vd.State = VolDataOK
	return vd
}

// plainJSONString decodes a valid JSON string without escapes, control
// characters or invalid UTF-8 (every value the kubelet writes) the way
// json.Unmarshal would, without its reflection; ok is false for any other.
func plainJSONString(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	body := v[1 : len(v)-1]
	for _, c := range body {
		if c < 0x20 || c == '\\' || c == '"' || c >= utf8.RuneSelf {
			return "", false
		}
	}
	return string(body), true
}

// jsonErrorReason turns a decoder error into a reason. Syntax errors quote
// at most the one offending character, never more of the content.
func jsonErrorReason(err error) string {
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return "no JSON value (only white space)"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON: unexpected EOF"
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, syn)
	}
	return "invalid JSON: " + err.Error()
}

// jsonKind names the kind of a valid JSON value from its first byte.
func jsonKind(v json.RawMessage) string {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return "empty"
	}
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
