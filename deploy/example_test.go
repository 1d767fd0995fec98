package deploy_test

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// Example lists the alerts of alerts.yaml (not its recording rules), read with Prometheus's own rule
// parser as Prometheus and promtool read it.
func Example() {
	groups, errs := rulefmt.ParseFile("alerts.yaml", false, model.LegacyValidation,
		parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		fmt.Println(errs)
		return
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				fmt.Printf("%s: %s after %s\n", r.Alert, r.Labels["severity"], r.For)
			}
		}
	}
	// Output:
	// VolreconLeakedStagingMount: warning after 30m
	// VolreconOrphanedPodWithMounts: warning after 30m
	// VolreconOrphanedPodNeedsDriver: warning after 30m
	// VolreconOrphanedPodRunning: warning after 30m
	// VolreconLeakedLoopDevice: warning after 30m
	// VolreconDataOnNodeDisk: critical after 5m
	// VolreconRootDiskBackedMount: critical after 5m
	// VolreconDeletedDeviceBehindMount: critical after 5m
	// VolreconBlockPublishNotADevice: critical after 5m
	// VolreconCorruptedMount: critical after 5m
	// VolreconHungMount: critical after 10m
	// VolreconStagingHashMismatch: critical after 15m
	// VolreconFilesystemAbortedReadOnly: critical after 5m
	// VolreconStagingDeviceGone: critical after 5m
	// VolreconMissingVolumeDataMounted: critical after 15m
	// VolreconMissingVolumeData: warning after 15m
	// VolreconCorruptVolumeDataMounted: critical after 15m
	// VolreconCorruptVolumeData: warning after 15m
	// VolreconStaleVolumeDataMismatch: critical after 30m
	// VolreconStaleVolumeData: warning after 30m
	// VolreconScanFailing: warning after 5m
	// VolreconTextfileRunFailed: warning after 15m
	// VolreconActivePodsUnknown: warning after 15m
	// VolreconMountTableInconsistent: warning after 15m
	// VolreconDown: warning after 10m
	// VolreconAbsent: warning after 30m
}
