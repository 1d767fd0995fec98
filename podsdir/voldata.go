//go:build unix

package podsdir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

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
	vd, _ := o.readVolData(p, at{unix.AT_FDCWD, o.HostPath(p)}, false, nil)
	return vd
}

// readVolData is ReadVolData of the file at a (host path p), with buf as
// the read buffer (grown as needed and returned for the next call; the
// VolData shares no memory with it). regular says that the parent's
// listing (readdir's d_type) showed a regular file: then the lstat before
// the open is skipped, since the open and the fstat after it guard against
// a file swapped meanwhile exactly as they do after an lstat.
func (o Options) readVolData(p string, a at, regular bool, buf []byte) (VolData, []byte) {
	vd := VolData{Path: p}
	if !regular {
		// Lstat first so that a device node or FIFO is never opened.
		var st unix.Stat_t
		if err := ignoringEINTR(func() error { return unix.Fstatat(a.dirfd, a.name, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
			return volDataOpenError(vd, err), buf
		}
		if reason := notRegularReason(fileModeType(uint32(st.Mode))); reason != "" {
			return corruptVolData(vd, reason), buf
		}
	}
	// O_NOFOLLOW and O_NONBLOCK: if the file was swapped for a symlink or a
	// FIFO since it was listed or lstat'ed, the open neither follows it nor
	// blocks. Raw system calls: an *os.File would cost an epoll registration
	// (refused for a regular file) and a finalizer per file.
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(a.dirfd, a.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return volDataOpenError(vd, err), buf
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return corruptVolData(vd, "unreadable: "+errText(err)), buf
	}
	if reason := notRegularReason(fileModeType(uint32(st.Mode))); reason != "" {
		return corruptVolData(vd, reason), buf
	}
	limit := o.maxVolDataSize()
	data, err := readUpTo(fd, buf, st.Size, limit+1)
	if err != nil {
		return corruptVolData(vd, "unreadable: "+errText(err)), data
	}
	if int64(len(data)) > limit {
		return corruptVolData(vd, fmt.Sprintf("larger than %d bytes", limit)), data
	}
	if len(data) == 0 {
		return corruptVolData(vd, "empty file"), data
	}
	return parseVolData(vd, data), data
}

// readUpTo reads fd to its end or to limit bytes, whichever comes first,
// into buf (its content is dropped). size, the file's size from fstat,
// only sizes the buffer: the file may have changed since.
func readUpTo(fd int, buf []byte, size, limit int64) ([]byte, error) {
	buf = slices.Grow(buf[:0], int(min(max(size+1, 512), limit)))
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(cap(buf)), limit-int64(len(buf)))))
		}
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = unix.Read(fd, buf[len(buf):min(int64(cap(buf)), limit)])
			return err
		})
		if err != nil {
			return buf, err
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	return buf, nil
}

// ignoringEINTR retries fn while it is interrupted by a signal (the Go
// runtime's preemption signals interrupt slow calls on FUSE and NFS).
func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}

// fileModeType is the type bits of a stat mode as an fs.FileMode.
func fileModeType(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	}
	return fs.ModeDevice
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

// volDataKeys lists the known keys and how each sets its field, in a fixed
// order, so that reasons are deterministic.
var volDataKeys = [...]struct {
	name string
	set  func(*VolData, string)
}{
	{"driverName", func(vd *VolData, s string) { vd.DriverName = s }},
	{"volumeHandle", func(vd *VolData, s string) { vd.VolumeHandle = s }},
	{"specVolID", func(vd *VolData, s string) { vd.SpecVolID = s }},
	{"nodeName", func(vd *VolData, s string) { vd.NodeName = s }},
	{"attachmentID", func(vd *VolData, s string) { vd.AttachmentID = s }},
	{"volumeLifecycleMode", func(vd *VolData, s string) { vd.VolumeLifecycleMode = s }},
	{"seLinuxMountContext", func(vd *VolData, s string) { vd.SELinuxMountContext = &s }}, // present, even empty
}

// parseVolData decodes data into vd and sets State and Reason.
func parseVolData(vd VolData, data []byte) VolData {
	if fast := vd; decodePlainVolData(&fast, data) {
		return checkVolData(fast, nil)
	}
	return decodeVolData(vd, data)
}

// decodeVolData is parseVolData with encoding/json, for any content: it
// names what is wrong with what is not plain.
func decodeVolData(vd VolData, data []byte) VolData {
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
	for _, k := range volDataKeys {
		v, ok := fields[k.name]
		if !ok {
			continue
		}
		if kind := jsonKind(v); kind != "string" {
			reasons = append(reasons, fmt.Sprintf("key %q is not a string (%s)", k.name, kind))
			continue
		}
		if plain, ok := plainJSONString(v); ok {
			k.set(&vd, plain)
			continue
		}
		var str string
		if err := json.Unmarshal(v, &str); err != nil {
			reasons = append(reasons, fmt.Sprintf("key %q: %s", k.name, jsonErrorReason(err)))
			continue
		}
		k.set(&vd, str)
	}
	return checkVolData(vd, reasons)
}

// checkVolData sets State and Reason from the reasons found while decoding
// and the two keys that must not be empty.
func checkVolData(vd VolData, reasons []string) VolData {
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

// decodePlainVolData decodes, in one pass and without reflection, the
// only shape the kubelet writes: one object whose keys and values are all
// plain strings (see plainJSONString), followed by anything. It fills the
// known keys as the full decoder of parseVolData would (a repeated key: the
// last one wins) and reports whether data had that shape; when it did not,
// vd is partly filled and only the full decoder can say what is wrong.
func decodePlainVolData(vd *VolData, data []byte) bool {
	i := skipJSONSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return false
	}
	i = skipJSONSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return true
	}
	for {
		key, next, ok := plainJSONStringAt(data, i)
		if !ok {
			return false
		}
		i = skipJSONSpace(data, next)
		if i == len(data) || data[i] != ':' {
			return false
		}
		value, next, ok := plainJSONStringAt(data, skipJSONSpace(data, i+1))
		if !ok {
			return false
		}
		if set := volDataSetter(key); set != nil {
			set(vd, string(value))
		}
		i = skipJSONSpace(data, next)
		if i == len(data) {
			return false
		}
		switch data[i] {
		case '}':
			return true
		case ',':
			i = skipJSONSpace(data, i+1)
		default:
			return false
		}
	}
}

// volDataSetter sets the field a known key fills; nil for another key.
func volDataSetter(key []byte) func(*VolData, string) {
	for _, k := range volDataKeys {
		if string(key) == k.name {
			return k.set
		}
	}
	return nil
}

// plainJSONStringAt returns the body of the plain JSON string (see
// plainJSONString) that starts at data[i], and the index after it.
func plainJSONStringAt(data []byte, i int) (body []byte, next int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return data[i+1 : j], j + 1, true
		case c < 0x20 || c == '\\' || c >= utf8.RuneSelf:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skipJSONSpace returns the index of the first byte at or after i that is
// not JSON white space.
func skipJSONSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// plainJSONString decodes a valid JSON string without escapes, control
// characters or invalid UTF-8 (every value the kubelet writes) the way
// json.Unmarshal would, without its reflection; ok is false for any other.
func plainJSONString(v json.RawMessage) (string, bool) {
	body, next, ok := plainJSONStringAt(v, 0)
	if !ok || next != len(v) {
		return "", false
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
