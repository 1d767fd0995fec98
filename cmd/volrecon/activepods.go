package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
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
