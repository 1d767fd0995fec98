package podlist_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/volrecon/volrecon/podlist"
	"github.com/volrecon/volrecon/reconstruct"
)

// The JSON of kubectl get pods: a static pod counts under its mirror pod's
// UID and under the config hash its pod dir is named by.
func ExampleParse() {
	pods := `{"kind": "List", "items": [
		{"metadata": {"name": "web-0", "uid": "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"}},
		{"metadata": {"name": "etcd-node-a", "uid": "2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c",
			"annotations": {"kubernetes.io/config.mirror": "6e3e5b3f0d8c4a1b9f2e7d6c5b4a3928"}}}]}`
	keys, err := podlist.Parse("pods.json", []byte(pods))
	fmt.Println(keys, err)
	_, err = podlist.Parse("pods.txt", []byte("0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91\nweb-0\n"))
	fmt.Println(err)
	// Output:
	// [0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91 2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c 6e3e5b3f0d8c4a1b9f2e7d6c5b4a3928] <nil>
	// pods.txt: line 2: "web-0" is not a pod UID (want one UID per line, or kubectl's JSON)
}

// A device that never ends is refused, not read into memory.
func ExampleReadFile() {
	_, err := podlist.ReadFile(context.Background(), "/dev/zero", podlist.Limits{MaxSize: 1 << 20})
	fmt.Println(errors.Is(err, podlist.ErrTooLarge))
	// Output: true
}

// A File is the desired state of a scanner that runs for long: it is read
// again whenever the agent that writes it changed it.
func ExampleNewFile() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "active-pods")
	_ = os.WriteFile(path, []byte("0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91 # web-0\n"), 0o600)

	source, err := podlist.NewFile(context.Background(), path, podlist.Limits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	opts := reconstruct.Options{ActivePods: source} // read at every Scan
	keys, _ := opts.ActivePods.ActivePods(context.Background())
	fmt.Println(keys, source.Status().Keys)
	// Output: [0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91] 1
}

// ParseList keeps the pods' names: a static pod is named under its config
// hash too, the name of its pod dir.
func ExampleParseList() {
	pods := `{"kind": "List", "items": [
		{"metadata": {"namespace": "kube-system", "name": "etcd-node-a", "uid": "2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c",
			"annotations": {"kubernetes.io/config.mirror": "6e3e5b3f0d8c4a1b9f2e7d6c5b4a3928"}}}]}`
	list, err := podlist.ParseList("pods.json", []byte(pods))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(list.PodNames()["6e3e5b3f0d8c4a1b9f2e7d6c5b4a3928"])
	// Output:
	// kube-system/etcd-node-a
}
