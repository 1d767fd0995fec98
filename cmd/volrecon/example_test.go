package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
)

// Scanning the embedded sample node prints a table and, last, a summary.
func Example() {
	var out bytes.Buffer
	code := run(context.Background(), []string{"scan", "--demo"}, env{stdout: &out, stderr: os.Stderr})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	fmt.Println("exit code", code)
	fmt.Println(lines[len(lines)-1])
	// Output:
	// exit code 0
	// 3 pods, 12 volumes, 3 global mounts, 3 volumes in use, 0 findings; mount table consistent (embedded table of --demo=healthy, 14 entries)
}

// Planning the cleanup of the sample node when one of its pods is gone,
// allowing volrecon to unmount that pod's own mounts: its CSI volume is
// still published, which only the driver may undo (NeedsDriver), so nothing
// of the pod is touched meanwhile.
func Example_plan() {
	var out bytes.Buffer
	stdin := strings.NewReader("0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91\n2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c\n")
	code := run(context.Background(), []string{"plan", "--demo", "--unmount", "--active-pods", "-"}, env{stdin: stdin, stdout: &out, stderr: os.Stderr})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	fmt.Println("exit code", code)
	fmt.Println(lines[len(lines)-1])
	// Output:
	// exit code 0
	// 3 actions (1 NeedsDriver, 2 Keep); nothing was changed
}

// A demo node that shows what volrecon finds: a pod deleted while its
// volumes are still mounted. The node names the pods that should run on
// it, so the orphan is found without --active-pods.
func Example_demoOrphan() {
	var out bytes.Buffer
	code := run(context.Background(), []string{"scan", "--demo=orphan"}, env{stdout: &out, stderr: os.Stderr})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	fmt.Println("exit code", code)
	fmt.Println(lines[len(lines)-1])
	// Output:
	// exit code 0
	// 1 pod (1 orphaned), 3 volumes, 1 global mount, 1 volume in use, 1 finding; mount table consistent (embedded table of --demo=orphan, 9 entries)
}
