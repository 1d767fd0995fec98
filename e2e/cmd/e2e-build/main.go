// Command e2e-build builds the Kubernetes binaries the e2e suite needs, so
// the slow first build can start ahead of `make e2e` (which calls the same
// code and finds the binaries cached).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/volrecon/volrecon/e2e/internal/k8sbuild"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, req := range k8sbuild.SuiteBuilds("", os.Stderr) {
		paths, err := k8sbuild.Build(ctx, req)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e-build:", err)
			os.Exit(1)
		}
		for b, p := range paths {
			fmt.Printf("%s %s %s\n", req.Version, b, p)
		}
	}
}
