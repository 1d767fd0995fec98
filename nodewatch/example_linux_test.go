package nodewatch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/volrecon/volrecon/nodewatch"
	"github.com/volrecon/volrecon/reconstruct"
)

// A scanner's loop: wait for a change, take it, and scan again only what
// changed (reconstruct.Incremental).
func Example() {
	root, _ := os.MkdirTemp("", "kubelet-")
	defer os.RemoveAll(root)
	_ = os.MkdirAll(filepath.Join(root, "pods"), 0o750)
	ctx := context.Background()
	w, err := nodewatch.New(ctx, nodewatch.Options{RootDir: root})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()

	// The kubelet makes a pod dir.
	_ = os.MkdirAll(filepath.Join(root, "pods", "8f3c1e2a-0000-4000-8000-000000000001", "volumes"), 0o750)

	if w.Wait(ctx, 10*time.Second) {
		changes := w.Take(ctx)
		fmt.Println("pods changed:", len(changes.Pods), changes.PodChanged("8f3c1e2a-0000-4000-8000-000000000001"))
		var inc reconstruct.Incremental // kept from scan to scan: its first scan walks everything
		st, err := inc.Scan(ctx, reconstruct.Options{Node: reconstruct.Node{RootDir: root}},
			reconstruct.Changed{All: changes.All, Pod: changes.PodChanged, CSI: changes.CSI, Staging: changes.Staging})
		if err == nil {
			fmt.Println("pods:", len(st.Pods))
		}
	}
	fmt.Println("polled parts:", len(w.Status().Untrusted))
	// Output:
	// pods changed: 1 true
	// pods: 1
	// polled parts: 0
}
