package k8sbuild

import "io"

// The releases the suite runs: the current kubelet, API server,
// controller-manager and scheduler, and two older kubelets for the
// upgrade/downgrade scenario (KEP-3756): OldVersion is the oldest the
// current API server supports (n-3); OldestVersion is the oldest minor
// still under the major clouds' extended support, 6 minors behind the API
// server (beyond the supported skew, see e2e/README.md).
const (
	CurrentVersion = "v1.37.2"
	OldVersion     = "v1.34.4"
	OldestVersion  = "v1.31.14"
)

// The indexes of SuiteBuilds' requests.
const (
	BuildCurrent      = iota // kubelet and kube-apiserver, CurrentVersion
	BuildControlPlane        // kube-controller-manager and kube-scheduler, CurrentVersion
	BuildOld                 // kubelet, OldVersion
	BuildOldest              // kubelet, OldestVersion
)

// SuiteBuilds lists every build the suite needs, in the order worth doing
// them: the current kubelet and API server first, so development can start
// on them; the controller-manager and the scheduler, which only the
// DaemonSet scenario runs, after them.
func SuiteBuilds(cacheDir string, log io.Writer) []Request {
	return []Request{
		{Version: CurrentVersion, Binaries: []string{"kubelet", "kube-apiserver"}, CacheDir: cacheDir, Log: log},
		{Version: CurrentVersion, Binaries: []string{"kube-controller-manager", "kube-scheduler"}, CacheDir: cacheDir, Log: log},
		{Version: OldVersion, Binaries: []string{"kubelet"}, CacheDir: cacheDir, Log: log},
		{Version: OldestVersion, Binaries: []string{"kubelet"}, CacheDir: cacheDir, Log: log},
	}
}
