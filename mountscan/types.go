package mountscan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DevID is a device number as mountinfo prints it (major:minor).
type DevID struct {
	Major uint32
	Minor uint32
}

// String returns "major:minor".
func (d DevID) String() string {
	return strconv.FormatUint(uint64(d.Major), 10) + ":" + strconv.FormatUint(uint64(d.Minor), 10)
}

// ParseDevID parses "major:minor", as DevID.String prints it.
func ParseDevID(s string) (DevID, error) {
	major, minor, ok := strings.Cut(s, ":")
	ma, err1 := strconv.ParseUint(major, 10, 32)
	mi, err2 := strconv.ParseUint(minor, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return DevID{}, fmt.Errorf("%w: device %q is not major:minor", ErrMalformed, s)
	}
	return DevID{Major: uint32(ma), Minor: uint32(mi)}, nil
}

// MarshalText is String: a DevID is "major:minor" in JSON too.
func (d DevID) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses "major:minor" (ParseDevID).
func (d *DevID) UnmarshalText(b []byte) error {
	id, err := ParseDevID(string(b))
	if err != nil {
		return err
	}
	*d = id
	return nil
}

// Mount is one line of a mountinfo file. Root, MountPoint, FSType and Source
// are unescaped (the kernel writes space, tab, newline and backslash as
// \040, \011, \012 and \134). Options and SuperOptions are kept raw: they can
// hold secrets and must never be logged or put into an error.
//
// The kernel marks a mount whose root was unlinked (a bind of a file or
// device node deleted since, say) by appending "//deleted" to the root
// field (dentry_path in fs/d_path.c). That suffix is no part of any path:
// the parser strips it from Root and sets Deleted, and FormatLine writes it
// back. A path the kernel prints never holds "//" otherwise.
type Mount struct {
	Line           int      // 1-based line number in the file it came from; read by statmount, the position in the namespace's list, its line in the mountinfo
	ID             int      // mount ID
	ParentID       int      // parent mount ID
	Dev            DevID    // st_dev of the filesystem
	Root           string   // path inside the filesystem that is mounted here, without the "//deleted" suffix
	Deleted        bool     // the root was unlinked: the field ended in "//deleted" (the node it names is gone)
	MountPoint     string   // where it is mounted
	Options        string   // per-mount options, comma-separated, raw
	OptionalFields []string // e.g. "shared:5", "master:3", "propagate_from:2", "unbindable"
	FSType         string   // e.g. "ext4", "fuse.sshfs"
	Source         string   // e.g. "/dev/nvme1n1", "tmpfs", "server:/export"
	SuperOptions   string   // per-superblock options, comma-separated, raw
}

// Propagation is the decoded form of a mount's optional fields.
type Propagation struct {
	Shared        int  // peer group ID of a shared mount, 0 if not shared
	Master        int  // peer group ID this mount receives from, 0 if none
	PropagateFrom int  // nearest dominant peer group, 0 if not given
	Unbindable    bool // the mount is unbindable
}

// Sentinel errors. Use errors.Is.
var (
	// ErrMalformed is wrapped by every *ParseError.
	ErrMalformed = errors.New("malformed mountinfo")
	// ErrInconsistent means consecutive reads of the mount table never agreed.
	ErrInconsistent = errors.New("mount table changed between reads")
	// ErrNotRegularFile: the path is a device, a FIFO or a pipe, not a mount
	// table (/dev/zero never ends; a FIFO blocks, and cannot be re-read).
	ErrNotRegularFile = errors.New("not a regular file")
	// ErrTooLarge: the file holds more than MaxTableSize bytes.
	ErrTooLarge = errors.New("larger than the size limit of a mount table")
	// ErrNoRootMount: a table without an entry at "/" (an empty one, say):
	// every live mount table has one, so it is not the node's.
	ErrNoRootMount = errors.New("no mount at /: not a live mount table")
)

// ParseError reports a malformed mountinfo line. Its text names the line
// number and the field, never the line itself or its options.
type ParseError struct {
	Line   int    // 1-based line number
	Field  string // the field that was wrong, e.g. "major:minor"
	Reason string // what was wrong with it
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("mountinfo line %d: %s: %s", e.Line, e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrMalformed) true.
func (e *ParseError) Unwrap() error { return ErrMalformed }

// ReadError reports that a mount table could not be read consistently: the
// read failed, or consecutive reads never agreed (Err wraps ErrInconsistent),
// or the content was malformed (Err is a *ParseError). Callers must then
// treat every mount state as unknown.
type ReadError struct {
	Path     string // the file read
	Attempts int    // how many reads were made
	Err      error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("read mount table %s (%d attempts): %v", e.Path, e.Attempts, e.Err)
}

// Unwrap returns the underlying error.
func (e *ReadError) Unwrap() error { return e.Err }
