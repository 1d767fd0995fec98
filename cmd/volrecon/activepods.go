package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/volrecon/volrecon/internal/boundedread"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// readActivePods reads the pods that should exist: one UID (or static pod
// config hash) per line ("#" starts a comment), or the JSON of `kubectl get
// pods -o json`, whose pods count under their UID and, for static pods, their
// config hash (reconstruct.PodKeys).
func readActivePods(path string, stdin io.Reader) ([]string, error) {
	data, err := readAll(path, stdin)
	if err != nil {
		return nil, fmt.Errorf("--active-pods %s: %w", path, err)
	}
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		return podUIDsFromJSON(path, trimmed)
	}
	var uids []string
	for i, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !podsdir.IsPodUID(line) {
			return nil, fmt.Errorf("--active-pods %s: line %d: %q is not a pod UID (want one UID per line, or kubectl's JSON)", path, i+1, line)
		}
		uids = append(uids, line)
	}
	return uids, nil
}

// Bounds of reading --active-pods: the JSON of thousands of pods with their
// annotations fits many times in maxActivePodsSize, and kubectl piping to
// stdin on a large cluster answers within activePodsTimeout. /dev/zero hits
// the first, a FIFO without a writer the second.
const maxActivePodsSize = 256 << 20

var activePodsTimeout = 2 * time.Minute

func readAll(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		return boundedread.Read(context.Background(), "stdin", stdin, maxActivePodsSize, activePodsTimeout)
	}
	return boundedread.ReadFile(context.Background(), path, maxActivePodsSize, activePodsTimeout)
}

// podList is the part of kubectl's JSON that matters.
type podList struct {
	Kind  string `json:"kind"`
	Items *[]struct {
		Metadata struct {
			UID         string            `json:"uid"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	} `json:"items"`
}

func podUIDsFromJSON(path string, data []byte) ([]string, error) {
	var list podList
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("--active-pods %s: not kubectl's JSON: %w", path, err)
	}
	if list.Items == nil {
		return nil, fmt.Errorf("--active-pods %s: JSON without \"items\" (kind %q): pass the output of kubectl get pods -o json", path, list.Kind)
	}
	uids := make([]string, 0, len(*list.Items))
	for i, item := range *list.Items {
		if !podsdir.IsPodUID(item.Metadata.UID) {
			return nil, fmt.Errorf("--active-pods %s: items[%d].metadata.uid %q is not a pod UID", path, i, item.Metadata.UID)
		}
		uids = append(uids, reconstruct.PodKeys(item.Metadata.UID, item.Metadata.Annotations)...)
	}
	return uids, nil
}

// activePodsFile is a reconstruct.PodSource over an --active-pods file that
// is read again whenever it changed (size, modification time or inode), so
// that `serve` follows a file an agent rewrites. A file that cannot be read
// or parsed makes ActivePods fail: every pod is then Unknown, never Orphaned.
type activePodsFile struct {
	path string

	mu       sync.Mutex
	keys     []string
	stamp    fileStamp
	readAt   time.Time // when keys were read
	modified time.Time // the file's modification time then
	lastErr  error
}

// fileStamp tells whether a file changed since it was read.
type fileStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

func stampOf(fi os.FileInfo) fileStamp {
	s := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = uint64(st.Ino) //nolint:unconvert // Ino is uint64 on linux/amd64 but not everywhere
	}
	return s
}

// newActivePodsFile reads the file once, so that a bad file is a usage error
// at start-up.
func newActivePodsFile(path string) (*activePodsFile, error) {
	f := &activePodsFile{path: path}
	if _, err := f.ActivePods(context.Background()); err != nil {
		return nil, err
	}
	return f, nil
}

// ActivePods returns the keys of the file, read again if it changed.
func (f *activePodsFile) ActivePods(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		f.lastErr = fmt.Errorf("--active-pods %s: %w", f.path, err)
		return nil, f.lastErr
	}
	// A FIFO or pipe (process substitution) gives its content once: it is
	// never read again.
	changed := fi.Mode().IsRegular() && (f.lastErr != nil || stampOf(fi) != f.stamp)
	if f.readAt.IsZero() || changed {
		keys, err := readActivePods(f.path, nil)
		f.lastErr = err
		if err != nil {
			return nil, err
		}
		f.keys, f.stamp, f.readAt, f.modified = keys, stampOf(fi), time.Now(), fi.ModTime()
	}
	return f.keys, nil
}

// status says how old the active pod list is, for /healthz.
func (f *activePodsFile) status(now time.Time) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := fmt.Sprintf("active pods: %s, %d keys, read %s ago, file modified %s ago",
		f.path, len(f.keys), now.Sub(f.readAt).Round(time.Second), now.Sub(f.modified).Round(time.Second))
	if f.lastErr != nil {
		s += "; the last read failed (every pod is Unknown): " + f.lastErr.Error()
	}
	return s
}
