package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrNilRegisterer is returned by New and NewKubeletCompat when given no
// registerer: metrics are never registered on the default registry behind the
// caller's back.
var ErrNilRegisterer = errors.New("metrics: nil prometheus.Registerer")

// register registers every collector on reg, or none: when one fails, those
// already registered are unregistered again and the error is returned as is
// (wrapped), so errors.As finds a prometheus.AlreadyRegisteredError.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return ErrNilRegisterer
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("metrics: %w", err)
		}
	}
	return nil
}
