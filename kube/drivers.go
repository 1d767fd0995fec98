package kube

import (
	"context"
	"fmt"
	"slices"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AttachFreeDrivers lists the CSIDriver objects and returns the names of
// those with attachRequired: false, whose volumes the kubelet leaves out
// of volumesInUse. On error the caller must treat every CSI driver as
// attachable, as the kubelet does when it cannot read them.
func AttachFreeDrivers(ctx context.Context, client API) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	list, err := client.ListCSIDrivers(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list CSIDrivers: %w", err)
	}
	var names []string
	for i := range list.Items {
		if attachFree(&list.Items[i]) {
			names = append(names, list.Items[i].Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// attachFree: attachRequired is explicitly false (unset means true).
func attachFree(d *storagev1.CSIDriver) bool {
	return d.Spec.AttachRequired != nil && !*d.Spec.AttachRequired
}
