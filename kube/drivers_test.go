package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/volrecon/volrecon/testkit/kubetest"
)

func csiDriver(name string, attachRequired *bool) *storagev1.CSIDriver {
	return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSIDriverSpec{AttachRequired: attachRequired}}
}

// Only attachRequired: false makes a driver attach-free (unset means
// true), from the one-shot list and from serve's watch alike; the watch
// names none until it has synced. The real API server paths (list, watch,
// RBAC) are covered by the e2e suite.
func TestAttachFreeDrivers(t *testing.T) {
	no, yes := false, true
	client := fake.NewSimpleClientset(csiDriver("efs.csi.aws.com", &no), csiDriver("ebs.csi.aws.com", &yes), csiDriver("legacy.example", nil))

	names, err := AttachFreeDrivers(t.Context(), kubetest.Clientset{Interface: client})
	require.NoError(t, err)
	assert.Equal(t, []string{"efs.csi.aws.com"}, names)

	w := NewWatcher(kubetest.Clientset{Interface: client}, "node-a", WatcherOptions{})
	assert.Empty(t, w.AttachFreeDrivers(), "nothing before the watch has synced")
	go w.Run(t.Context())
	require.Eventually(t, func() bool { return len(w.AttachFreeDrivers()) == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"efs.csi.aws.com"}, w.AttachFreeDrivers())
}
