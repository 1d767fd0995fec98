package reconstruct

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/volrecon/volrecon/kubelet"
)

// ErrNotHostMountTable is wrapped by every *NotHostMountTableError.
var ErrNotHostMountTable = errors.New("the mount table is not the host's")

// NotHostMountTableError says that the mount table of a node read through
// a HostRoot belongs to another mount namespace than the host's: in a
// container with the host at /host, /proc/self/mountinfo is the
// container's own table, where no volume of the kubelet is mounted, so
// every volume would look unmounted and every staging mount stale or
// leaked.
type NotHostMountTableError struct {
	// Table is the mount table, TableNamespace its mount namespace.
	Table, TableNamespace string
	// HostRoot is the prefix the host is read under; HostNamespace the
	// mount namespace of the host's PID 1, read under it.
	HostRoot, HostNamespace string
}

func (e *NotHostMountTableError) Error() string {
	return fmt.Sprintf("%v: %s is the table of mount namespace %s, but the host's PID 1 (%s) is in %s: "+
		"read the host's table, /proc/1/mountinfo in a container with the host's PID namespace (hostPID)",
		ErrNotHostMountTable, e.Table, e.TableNamespace, kubelet.NewHost(e.HostRoot).Path("proc/1"), e.HostNamespace)
}

func (e *NotHostMountTableError) Unwrap() error { return ErrNotHostMountTable }

// procMountInfo matches the mount table of a process, whose namespace is
// in /proc/<pid>/ns/mnt.
var procMountInfo = regexp.MustCompile(`^/proc/(self|thread-self|[0-9]+)/mountinfo$`)

// CheckMountTable tells whether the node's mount table is the host's when
// the host is read through a HostRoot: the table of a process
// (/proc/<pid>/mountinfo) must be of the mount namespace of the host's
// PID 1 as seen under HostRoot (<HostRoot>/proc/1/ns/mnt). It returns a
// *NotHostMountTableError when they differ, and nil when they agree, when
// there is no HostRoot, or when it cannot tell (a table given by
// Source.Read or copied to a file, a namespace that cannot be read: the
// host's /proc not under HostRoot, no CAP_SYS_PTRACE). Scan calls it
// before it reads anything.
func (n Node) CheckMountTable() error {
	if n.Host().IsLocal() || n.MountTable.Read != nil {
		return nil
	}
	table := filepath.Clean(n.MountTable.Name())
	if !procMountInfo.MatchString(table) {
		return nil
	}
	tableNS, err := os.Readlink(filepath.Join(filepath.Dir(table), "ns", "mnt"))
	if err != nil {
		return nil
	}
	hostNS, err := os.Readlink(n.HostPath("/proc/1/ns/mnt"))
	if err != nil || hostNS == tableNS {
		return nil
	}
	return &NotHostMountTableError{Table: table, TableNamespace: tableNS, HostRoot: n.HostRoot, HostNamespace: hostNS}
}
