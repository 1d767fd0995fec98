//go:build unix

package podsdir

import "sync"

// interner makes equal strings share one copy. The walkers of a scan share
// one: a node's thousands of CSI volumes name the same few drivers, nodes
// and lifecycle modes in their vol_data.json, each read as a string of its
// own.
type interner struct {
	mu    sync.Mutex
	names map[string]string
}

// get returns the copy of s the interner holds; a nil interner holds none.
func (in *interner) get(s string) string {
	if in == nil || s == "" {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if c, ok := in.names[s]; ok {
		return c
	}
	if in.names == nil {
		in.names = map[string]string{}
	}
	in.names[s] = s
	return s
}

// volData interns the fields of vd that repeat from volume to volume; the
// handle, spec volume ID and attachment ID are the volume's own.
func (in *interner) volData(vd *VolData) {
	for _, f := range []*string{&vd.DriverName, &vd.NodeName, &vd.VolumeLifecycleMode} {
		*f = in.get(*f)
	}
	if vd.SELinuxMountContext != nil {
		c := in.get(*vd.SELinuxMountContext)
		vd.SELinuxMountContext = &c
	}
}

// tight returns s in a slice of its own length when appending left much of
// its capacity unused.
func tight[T any](s []T) []T {
	if cap(s)-len(s) <= len(s)/8 {
		return s
	}
	return append(make([]T, 0, len(s)), s...)
}
