package kube

import (
	"context"
	"fmt"
	"slices"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AttachFreeDrivers lists the CSIDriver objects, every page of the list
// within DefaultTimeout, and returns the names of those with
// attachRequired: false, whose volumes the kubelet leaves out of
// volumesInUse. On error the caller must treat every CSI driver as
// attachable, as the kubelet does when it cannot read them.
func AttachFreeDrivers(ctx context.Context, client API) ([]string, error) {
	items, _, err := listWithin(ctx, DefaultTimeout, "csidrivers", metav1.ListOptions{}, driverPages(client))
	if err != nil {
		return nil, fmt.Errorf("list CSIDrivers: %w", err)
	}
	var names []string
	for i := range items {
		if attachFree(&items[i]) {
			names = append(names, items[i].Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// driverPages lists one page of CSIDrivers.
func driverPages(client API) pageFunc[storagev1.CSIDriver] {
	return func(ctx context.Context, opts metav1.ListOptions) ([]storagev1.CSIDriver, *metav1.ListMeta, error) {
		list, err := client.ListCSIDrivers(ctx, opts)
		if err != nil {
			return nil, nil, err
		}
		return list.Items, &list.ListMeta, nil
	}
}

// attachFree: attachRequired is explicitly false (unset means true).
func attachFree(d *storagev1.CSIDriver) bool {
	return d.Spec.AttachRequired != nil && !*d.Spec.AttachRequired
}
