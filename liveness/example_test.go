package liveness_test

import (
	"context"
	"fmt"

	"github.com/volrecon/volrecon/liveness"
	"github.com/volrecon/volrecon/reconstruct"
)

// A scan that looks for evidence of life before it calls an orphan
// removable: in every mount namespace of the host, in its tasks' cgroups,
// and in the container runtime found at one of the default sockets.
func Example() {
	opts := reconstruct.Options{ActivePods: reconstruct.PodList{"0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"}, LifeChecker: liveness.New(liveness.Options{})}
	st, err := reconstruct.Scan(context.Background(), opts)
	if err != nil {
		return // no kubelet root here
	}
	for _, f := range st.Findings {
		if f.Kind == reconstruct.OrphanedPodRunning {
			fmt.Println(f.PodUID, f.Message)
		}
	}
}
