package podlist

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// Default bounds of a read: the JSON of thousands of pods with their
// annotations fits DefaultMaxSize many times over, and kubectl piping into a
// reader on a large cluster answers within DefaultTimeout.
const (
	DefaultMaxSize = 256 << 20
	DefaultTimeout = 2 * time.Minute
)

// Limits bound one read of a pod list; a zero field is its default.
type Limits struct {
	// MaxSize is the most bytes read: more is ErrTooLarge (/dev/zero).
	MaxSize int64
	// Timeout bounds the open and the read: past it, ErrTimeout (a FIFO
	// without a writer). A read that timed out is abandoned, not
	// interrupted: its goroutine stays blocked until the file answers.
	Timeout time.Duration
	// Node, if set, is the node the list must be of: kubectl's JSON with a
	// pod whose spec.nodeName is another node is refused (ErrOtherNode).
	// A list of the pods of several nodes is refused whatever Node is.
	Node string
}

func (l Limits) maxSize() int64 {
	if l.MaxSize <= 0 {
		return DefaultMaxSize
	}
	return l.MaxSize
}

func (l Limits) timeout() time.Duration {
	if l.Timeout <= 0 {
		return DefaultTimeout
	}
	return l.Timeout
}

// Errors an *Error wraps, for errors.Is.
var (
	// ErrTooLarge: the file or stream holds more than Limits.MaxSize.
	ErrTooLarge = bounded.ErrTooLarge
	// ErrTimeout: the file or stream did not answer within Limits.Timeout.
	ErrTimeout = bounded.ErrTimeout
	// ErrNotPodKey: a line, or an items[].metadata.uid, is not a pod UID
	// (nor a static pod's config hash).
	ErrNotPodKey = errors.New("is not a pod UID")
	// ErrNotKubectlJSON: the content starts with "{" but is not JSON.
	ErrNotKubectlJSON = errors.New("not kubectl's JSON")
	// ErrNoItems: JSON without "items", such as one pod's JSON instead of
	// a list.
	ErrNoItems = errors.New(`JSON without "items"`)
	// ErrOtherNode: kubectl's JSON lists pods of another node than
	// Limits.Node, or of several nodes (spec.nodeName): every pod dir of
	// this node would look orphaned.
	ErrOtherNode = errors.New("not this node's pod list")
)

// Error is a pod list that could not be read or parsed.
type Error struct {
	// Path is the file, or the name given for a stream.
	Path string
	// Line is the 1-based line that is not a pod key, or 0.
	Line int
	Err  error
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: line %d: %v", e.Path, e.Line, e.Err)
	}
	return e.Path + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// List is a parsed pod list: its pod keys, and the pods' names where the
// list gives them (kubectl's JSON does; a list of UIDs does not). It is a
// reconstruct.PodSource and a reconstruct.PodNamer.
type List struct {
	// Keys are the pod keys (reconstruct.PodSource).
	Keys []string
	// Names are the pods' namespace and name by each of their keys; nil
	// for a list of UIDs.
	Names map[string]reconstruct.PodName
	// Nodes are the nodes the pods are bound to (spec.nodeName), sorted;
	// nil for a list of UIDs. ParseList refuses more than one.
	Nodes []string
}

// CheckNode refuses a list whose pods are bound to another node than node
// (ErrOtherNode); name names the list in the error. A list of UIDs, which
// names no node, passes.
func (l *List) CheckNode(name, node string) error {
	if node == "" || l == nil {
		return nil
	}
	for _, n := range l.Nodes {
		if n != node {
			return &Error{Path: name, Err: fmt.Errorf("%w: its pods are bound to node %q (spec.nodeName), this is node %q: "+
				"every pod dir here would look orphaned; take the list with kubectl get pods -A --field-selector spec.nodeName=%s -o json",
				ErrOtherNode, n, node, node)}
		}
	}
	return nil
}

// ActivePods returns the keys.
func (l *List) ActivePods(context.Context) ([]string, error) { return l.Keys, nil }

// PodNames returns the names.
func (l *List) PodNames() map[string]reconstruct.PodName { return l.Names }

// ReadFile reads and parses the pod list at path, within l. It opens the
// file within the bound too: opening a FIFO blocks until a writer comes.
func ReadFile(ctx context.Context, path string, l Limits) ([]string, error) {
	list, err := ReadListFile(ctx, path, l)
	return keysOf(list), err
}

// ReadListFile is ReadFile that keeps the pods' names.
func ReadListFile(ctx context.Context, path string, l Limits) (*List, error) {
	data, err := bounded.ReadFile(ctx, path, l.maxSize(), l.timeout())
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	return parseFor(path, data, l.Node)
}

// Read reads and parses a pod list from r (say, stdin), within l; name
// names it in errors.
func Read(ctx context.Context, name string, r io.Reader, l Limits) ([]string, error) {
	list, err := ReadList(ctx, name, r, l)
	return keysOf(list), err
}

// ReadList is Read that keeps the pods' names.
func ReadList(ctx context.Context, name string, r io.Reader, l Limits) (*List, error) {
	data, err := bounded.Read(ctx, name, r, l.maxSize(), l.timeout())
	if err != nil {
		return nil, &Error{Path: name, Err: err}
	}
	return parseFor(name, data, l.Node)
}

// parseFor parses a list and checks that it is node's (List.CheckNode).
func parseFor(name string, data []byte, node string) (*List, error) {
	list, err := ParseList(name, data)
	if err != nil {
		return nil, err
	}
	if err := list.CheckNode(name, node); err != nil {
		return nil, err
	}
	return list, nil
}

// Parse parses a pod list that was read already: kubectl's JSON when it
// starts with "{", else one pod key per line. It returns the pod keys, for
// a reconstruct.PodSource; name names the list in errors. An empty list is
// no error (reconstruct refuses it where pod dirs exist, unless told that
// empty is authoritative).
func Parse(name string, data []byte) ([]string, error) {
	list, err := ParseList(name, data)
	return keysOf(list), err
}

// ParseList is Parse that keeps the pods' names and nodes (kubectl's
// JSON). Kubectl's JSON whose pods are bound to more than one node is
// refused (ErrOtherNode): a node's list has the pods of that node only.
func ParseList(name string, data []byte) (*List, error) {
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		return parseJSON(name, trimmed)
	}
	var keys []string
	for i, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !podsdir.IsPodUID(line) {
			return nil, &Error{Path: name, Line: i + 1,
				Err: fmt.Errorf("%q %w (want one UID per line, or kubectl's JSON)", line, ErrNotPodKey)}
		}
		keys = append(keys, line)
	}
	return &List{Keys: keys}, nil
}

func keysOf(l *List) []string {
	if l == nil {
		return nil
	}
	return l.Keys
}

// kubectlList is the part of kubectl's JSON that matters.
type kubectlList struct {
	Kind  string `json:"kind"`
	Items *[]struct {
		Metadata struct {
			Name        string            `json:"name"`
			Namespace   string            `json:"namespace"`
			UID         string            `json:"uid"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
	} `json:"items"`
}

func parseJSON(name string, data []byte) (*List, error) {
	var list kubectlList
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, &Error{Path: name, Err: fmt.Errorf("%w: %w", ErrNotKubectlJSON, err)}
	}
	if list.Items == nil {
		return nil, &Error{Path: name, Err: fmt.Errorf("%w (kind %q): pass the output of kubectl get pods -o json", ErrNoItems, list.Kind)}
	}
	out := &List{Keys: make([]string, 0, len(*list.Items)), Names: map[string]reconstruct.PodName{}}
	for i, item := range *list.Items {
		if n := item.Spec.NodeName; n != "" && !slices.Contains(out.Nodes, n) {
			out.Nodes = append(out.Nodes, n)
		}
		m := item.Metadata
		if !podsdir.IsPodUID(m.UID) {
			return nil, &Error{Path: name, Err: fmt.Errorf("items[%d].metadata.uid %q %w", i, m.UID, ErrNotPodKey)}
		}
		keys := reconstruct.PodKeys(m.UID, m.Annotations)
		out.Keys = append(out.Keys, keys...)
		if m.Name != "" {
			for _, k := range keys {
				out.Names[k] = reconstruct.PodName{Namespace: m.Namespace, Name: m.Name}
			}
		}
	}
	slices.Sort(out.Nodes)
	if len(out.Nodes) > 1 {
		return nil, &Error{Path: name, Err: fmt.Errorf("%w: its pods are bound to %d nodes (spec.nodeName: %s): every pod dir of a node would look "+
			"orphaned but for its own; take the list of one node's pods: kubectl get pods -A --field-selector spec.nodeName=NODE -o json",
			ErrOtherNode, len(out.Nodes), summarize(out.Nodes, 3))}
	}
	return out, nil
}

// summarize names the first n items, quoted.
func summarize(items []string, n int) string {
	quoted := make([]string, 0, n)
	for _, it := range items[:min(n, len(items))] {
		quoted = append(quoted, strconv.Quote(it))
	}
	s := strings.Join(quoted, ", ")
	if len(items) > n {
		s += fmt.Sprintf(" and %d more", len(items)-n)
	}
	return s
}
