package cluster

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// MountPoints lists the mount points at or below dir in this process's
// mount namespace, deepest first (the order to unmount them in). A path
// mounted several times appears once per mount.
func MountPoints(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	return points, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll unmounts everything at or below dir, deepest first, lazily
// when a plain unmount is refused, and says what is still mounted.
func unmountAll(dir string) error {
	for range 5 {
		points, err := MountPoints(dir)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		for _, p := range points {
			if err := syscall.Unmount(p, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
				_ = syscall.Unmount(p, syscall.MNT_DETACH)
			}
		}
	}
	points, err := MountPoints(dir)
	if err != nil {
		return err
	}
	if len(points) > 0 {
		return fmt.Errorf("still mounted under %s: %v", dir, points)
	}
	return nil
}
