package k8sbuild

import "io"

// The releases the suite runs: the current kubelet and API server, and an
// older kubelet for the upgrade/downgrade scenario (KEP-3756).
const (
	CurrentVersion = "v1.37.2"
	OldVersion     = "v1.34.4"
)

// SuiteBuilds lists every build the suite needs, in the order worth doing
// them: the current kubelet first, so development can start on it.
func SuiteBuilds(cacheDir string, log io.Writer) []Request {
	return []Request{
		{Version: CurrentVersion, Binaries: []string{"kubelet", "kube-apiserver"}, CacheDir: cacheDir, Log: log},
		{Version: OldVersion, Binaries: []string{"kubelet"}, CacheDir: cacheDir, Log: log},
	}
}
