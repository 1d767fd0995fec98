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
)

// DefaultTimeout bounds one request to the API server.
const DefaultTimeout = 10 * time.Second

// Lister is a reconstruct.PodSource that lists the pods bound to one node
// each time it is asked, with a quorum read: the answer reflects every pod
// created before the call, so a pod whose dir a scan found is never missed.
// For the one-shot commands (scan, plan, cleanup); serve uses a Watcher.
type Lister struct {
	Client   API
	NodeName string
	Timeout  time.Duration // per request (0 = DefaultTimeout)

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
	pods, err := listNodePods(ctx, l.Client, l.NodeName, l.Timeout)
	l.mu.Lock()
	l.last = pods
	l.mu.Unlock()
	return pods, err
}

// nodeSelector selects the pods bound to a node.
func nodeSelector(node string) string {
	return fields.OneTermEqualSelector("spec.nodeName", node).String()
}

func listNodePods(ctx context.Context, client API, node string, timeout time.Duration) ([]*corev1.Pod, error) {
	if node == "" {
		return nil, ErrNoNodeName
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(timeout))
	defer cancel()
	// ResourceVersion "" asks for a quorum read, never a stale cache.
	list, err := client.ListPods(ctx, metav1.ListOptions{FieldSelector: nodeSelector(node)})
	if err != nil {
		return nil, fmt.Errorf("list the pods of node %s: %w", node, err)
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultTimeout
	}
	return d
}
