// Package kubetest adapts a client-go clientset (in tests, the fake one) to
// kube.API, so that tests can keep the fake's object tracker and reactors.
// Only tests import it: the production binary must not link the clientset
// and its scheme of every API group (see cmd/volrecon's TestDeps). It does
// not import package kube, whose own tests use it; Clientset satisfies
// kube.API by its method set.
package kubetest

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Clientset is kube.API over a clientset.
type Clientset struct {
	kubernetes.Interface
}

func (c Clientset) ListPods(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	return c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
}

func (c Clientset) WatchPods(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, opts)
}

func (c Clientset) GetPersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return c.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c Clientset) GetPersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return c.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

func (c Clientset) ListCSIDrivers(ctx context.Context, opts metav1.ListOptions) (*storagev1.CSIDriverList, error) {
	return c.StorageV1().CSIDrivers().List(ctx, opts)
}

func (c Clientset) WatchCSIDrivers(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.StorageV1().CSIDrivers().Watch(ctx, opts)
}

func (c Clientset) GetVolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error) {
	return c.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
}

func (c Clientset) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	return c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// IsWatchListSemanticsUnSupported passes on what the clientset says (the
// fake one of client-go 0.35 on cannot stream a watch list), so that kube's
// informers list and then watch instead of waiting for an initial-events
// bookmark; as client-go's watchlist.DoesClientNotSupportWatchListSemantics,
// which 0.30 lacks.
func (c Clientset) IsWatchListSemanticsUnSupported() bool {
	u, ok := c.Interface.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

// The Events go where client-go's own event sink sends them. (The methods
// with a context came in client-go 0.33; the fake ignores it anyway.)

func (c Clientset) events() typedcorev1.EventInterface { return c.CoreV1().Events("") }

func (c Clientset) CreateEvent(_ context.Context, e *corev1.Event) (*corev1.Event, error) {
	return c.events().CreateWithEventNamespace(e)
}

func (c Clientset) UpdateEvent(_ context.Context, e *corev1.Event) (*corev1.Event, error) {
	return c.events().UpdateWithEventNamespace(e)
}

func (c Clientset) PatchEvent(_ context.Context, e *corev1.Event, patch []byte) (*corev1.Event, error) {
	return c.events().PatchWithEventNamespace(e, patch)
}
