package mountscan

import (
	"math"
	"strings"
)

// Propagation decodes the optional fields. Unknown tags and malformed
// numbers are ignored: they do not change what the known tags mean.
func (m Mount) Propagation() Propagation {
	var p Propagation
	for _, f := range m.OptionalFields {
		tag, val, _ := strings.Cut(f, ":")
		switch tag {
		case "shared":
			p.Shared = groupID(val)
		case "master":
			p.Master = groupID(val)
		case "propagate_from":
			p.PropagateFrom = groupID(val)
		case "unbindable":
			p.Unbindable = true
		}
	}
	return p
}

func groupID(s string) int {
	v, _ := parseDecimal(s, math.MaxInt32)
	return int(v)
}

// SuperOption returns the value of key in SuperOptions. A flag without "="
// (e.g. "ro") is found with an empty value. Surrounding double quotes are
// removed, and commas inside double quotes do not split options, as in an
// SELinux context="system_u:object_r:container_file_t:s0:c0,c1". The value
// is raw (not unescaped) and may be a secret: do not log it.
func (m Mount) SuperOption(key string) (string, bool) {
	return lookupOption(m.SuperOptions, key)
}

// MountOption is SuperOption for the per-mount Options.
func (m Mount) MountOption(key string) (string, bool) {
	return lookupOption(m.Options, key)
}

func lookupOption(opts, key string) (string, bool) {
	if key == "" {
		return "", false
	}
	for opts != "" {
		var opt string
		opt, opts = nextOption(opts)
		k, v, _ := strings.Cut(opt, "=")
		if k == key {
			return unquote(v), true
		}
	}
	return "", false
}

// nextOption splits off the first comma-separated option, ignoring commas
// inside double quotes.
func nextOption(s string) (opt, rest string) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				return s[:i], s[i+1:]
			}
		}
	}
	return s, ""
}

func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// SuperblockReadOnly returns the superblock option that says the kernel
// holds the filesystem read-only: "ro" (the superblock flag, first in
// SuperOptions), or "emergency_ro", which Linux 6.18's ext4 shows instead
// after it aborted on an error with errors=remount-ro (the flag then stays
// "rw"); "" when neither is there. The per-mount Options ("ro" or "rw"
// first) are apart: a read-write mount of a read-only superblock fails
// every write with EROFS.
func (m Mount) SuperblockReadOnly() string {
	for _, flag := range []string{"ro", "emergency_ro"} {
		if _, ok := m.SuperOption(flag); ok {
			return flag
		}
	}
	return ""
}

// MountReadWrite reports whether the per-mount Options say "rw".
func (m Mount) MountReadWrite() bool {
	_, ok := m.MountOption("rw")
	return ok
}
