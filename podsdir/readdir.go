//go:build unix

package podsdir

import "io/fs"

// dirent is one entry of a listing: its name and its type as readdir's
// d_type gave it (never followed).
type dirent struct {
	name string
	typ  EntryType
}

// Name is the entry's name.
func (d dirent) Name() string { return d.name }

// direntsOf turns the entries of os.ReadDir (and the tests' listings) into
// dirents.
func direntsOf(es []fs.DirEntry) []dirent {
	if es == nil {
		return nil
	}
	out := make([]dirent, len(es))
	for i, e := range es {
		out[i] = dirent{name: e.Name(), typ: EntryTypeOf(e.Type())}
	}
	return out
}

// childPath is filepath.Join(dir, name) for a clean dir and a name from a
// listing (one component, never "." or ".."), without cleaning again.
func childPath(dir, name string) string {
	if dir == "/" {
		return dir + name
	}
	return dir + "/" + name
}
