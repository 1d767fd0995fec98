package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfo names the build of the program that exports the metrics.
type BuildInfo struct {
	Version string // e.g. v0.3.0, or "dev"
	Commit  string // the VCS revision, "" when unknown
}

// NewBuildInfo registers volrecon_build_info on reg: always 1, with the
// version, the commit and the Go version as labels, so that a rule or a
// dashboard can tell which build runs where (and join any series to it).
// reg must not be nil (ErrNilRegisterer).
func NewBuildInfo(reg prometheus.Registerer, b BuildInfo) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: prometheus.BuildFQName(namespace, "", "build_info"),
		Help: "Always 1; the labels name the version, the commit and the Go version volrecon was built from.",
		ConstLabels: prometheus.Labels{
			"version": b.Version, "commit": b.Commit, "goversion": runtime.Version(),
		},
	})
	g.Set(1)
	return register(reg, g)
}
