//go:build unix

package podsdir

import (
	"context"
	"fmt"
	"slices"
	"syscall"

	"github.com/volrecon/volrecon/internal/bounded"
)

// DirID identifies a file as the kernel does: its inode on its device,
// reached through its mount (statx's mount ID, Linux 5.8+; 0 where the
// kernel gives none). A path that gives the same DirID twice led to the
// same file through the same mount both times; a mount made or gone on or
// above it, a rename of it or of a dir above it, or a symlink on the way
// retargeted gives another.
type DirID struct {
	MountID, Dev, Ino uint64
}

// Lookup is one step of a path's resolution: the entry Name looked up in
// the host dir Dir (its path as resolved so far, without HostRoot), whose
// identity was DirID.
type Lookup struct {
	Dir, Name string
	DirID     DirID
}

// Resolution is how a host path resolves, as Scan resolves the kubelet's
// dirs: the lookups made on the way, in order, and what they led to.
// Every file that decides where the path leads is a dir of Lookups, or
// the path itself: a change of one of them (an entry of Dir named Name
// renamed, removed, made or replaced by a symlink, a mount on or above
// it) gives another Resolution.
type Resolution struct {
	// Path is the host path resolved (on error: as far as it was).
	Path string
	// ID is the identity of Path (zero on error).
	ID      DirID
	Lookups []Lookup
	// Err says why the path does not resolve to a dir (nil when it does).
	Err error
}

// Same reports whether r and o resolved alike: the same lookups in dirs
// of the same identities, leading to the same dir, or failing alike.
func (r Resolution) Same(o Resolution) bool {
	return r.Path == o.Path && r.ID == o.ID && (r.Err == nil) == (o.Err == nil) && slices.Equal(r.Lookups, o.Lookups)
}

// Resolve resolves the host path p as Scan resolves the kubelet's dirs
// (KubeletDirs), within Timeout, and says how (Resolution). It never
// fails as a whole: a path that does not resolve to a dir has Err set and
// the lookups made until then.
func (o Options) Resolve(ctx context.Context, p string) Resolution {
	res, err := bounded.Call(ctx, o.HostPath(p), o.Timeout, func() (Resolution, error) {
		r, err := o.resolveLookups(p, true)
		res := Resolution{Path: r.Path, Lookups: r.lookups}
		if err == nil && !r.Info.IsDir() {
			err = fmt.Errorf("resolve %s: %w", o.HostPath(r.Path), syscall.ENOTDIR)
		}
		if err == nil {
			res.ID, err = identify(o.HostPath(r.Path))
		}
		return res, err
	})
	res.Err = err
	if err != nil {
		res.ID = DirID{}
	}
	return res
}

// Identify returns the identity of host path p, never following a symlink
// at p itself, within Timeout.
func (o Options) Identify(ctx context.Context, p string) (DirID, error) {
	hp := o.HostPath(p)
	return bounded.Call(ctx, hp, o.Timeout, func() (DirID, error) { return identify(hp) })
}
