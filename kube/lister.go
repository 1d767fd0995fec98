package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/reconstruct"
)

// DefaultTimeout bounds one answer of the API server: a list, all its
// pages together, or one Get.
const DefaultTimeout = 10 * time.Second

// Lister is a reconstruct.PodSource that lists the pods bound to one node
// each time it is asked, with a quorum read: the answer reflects every pod
// created before the call, so a pod whose dir a scan found is never missed.
// For the one-shot commands (scan, plan, cleanup); serve uses a Watcher.
type Lister struct {
	Client   API
	NodeName string
	Timeout  time.Duration // per list, all its pages, and per Get (0 = DefaultTimeout)
	PageSize int64         // objects per page of a list (0 = DefaultPageSize)
	// NeverStagedAfter is how long a pod may wait on an attached volume
	// with no staging mount before CheckCluster reports it (0 =
	// DefaultNeverStagedAfter).
	NeverStagedAfter time.Duration

	now func() time.Time // tests set the clock of CheckCluster

	mu   sync.Mutex
	last []*corev1.Pod // the pods of the last list that succeeded
}

// ActivePods lists the pods of the node and returns their keys (PodKeys).
func (l *Lister) ActivePods(ctx context.Context) ([]string, error) {
	pods, err := l.list(ctx)
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(4).Info("Listed the node's pods", "node", l.NodeName, "pods", len(pods))
	return keysOf(pods), nil
}

// PodNames returns the names of the pods of the last list ActivePods made
// (reconstruct.PodNamer), by each of their keys.
func (l *Lister) PodNames() map[string]reconstruct.PodName {
	l.mu.Lock()
	defer l.mu.Unlock()
	return namesOf(l.last)
}

// CSIVolumes returns the CSI volumes the node's pods use (see CSIVolumes),
// for the pods of the last list ActivePods made, so that the pods a scan
// judged by are those whose volumes count; it lists them when there was
// none. The answer is as of that list: a pod bound to the node afterwards
// is not in it (CSIVolumesNow).
func (l *Lister) CSIVolumes(ctx context.Context) ([]string, error) {
	l.mu.Lock()
	pods := l.last
	l.mu.Unlock()
	if pods == nil {
		return l.CSIVolumesNow(ctx)
	}
	return CSIVolumes(ctx, l.Client, pods, l.Timeout)
}

// CSIVolumesNow lists the node's pods afresh (a quorum read) and returns
// the CSI volumes they use: for checking again right before a NodeUnstage.
func (l *Lister) CSIVolumesNow(ctx context.Context) ([]string, error) {
	pods, err := l.list(ctx)
	if err != nil {
		return nil, err
	}
	return CSIVolumes(ctx, l.Client, pods, l.Timeout)
}

// list lists the node's pods and keeps them for CSIVolumes; a list that
// failed forgets the last one, which an older answer must not stand for.
func (l *Lister) list(ctx context.Context) ([]*corev1.Pod, error) {
	pods, err := listNodePods(ctx, l.Client, l.NodeName, l.Timeout, l.PageSize)
	l.mu.Lock()
	l.last = pods
	l.mu.Unlock()
	return pods, err
}

// nodeSelector selects the pods bound to a node.
func nodeSelector(node string) string {
	return fields.OneTermEqualSelector("spec.nodeName", node).String()
}

// listNodePods lists the pods bound to node with a quorum read, every page
// of it (listAll) within timeout.
func listNodePods(ctx context.Context, client API, node string, timeout time.Duration, pageSize int64) ([]*corev1.Pod, error) {
	if node == "" {
		return nil, ErrNoNodeName
	}
	// ResourceVersion "" asks for a quorum read, never a stale cache.
	opts := metav1.ListOptions{FieldSelector: nodeSelector(node), Limit: pageSize}
	items, _, err := listWithin(ctx, orDefault(timeout), "pods", opts, podPages(client))
	if err != nil {
		return nil, fmt.Errorf("list the pods of node %s: %w", node, err)
	}
	pods := make([]*corev1.Pod, len(items))
	for i := range items {
		pods[i] = &items[i]
	}
	return pods, nil
}

// podPages lists one page of pods.
func podPages(client API) pageFunc[corev1.Pod] {
	return func(ctx context.Context, opts metav1.ListOptions) ([]corev1.Pod, *metav1.ListMeta, error) {
		list, err := client.ListPods(ctx, opts)
		if err != nil {
			return nil, nil, err
		}
		return list.Items, &list.ListMeta, nil
	}
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultTimeout
	}
	return d
}
