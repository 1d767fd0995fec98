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
	code := run(context.Background(), []string{"scan", "--demo"}, &out, os.Stderr)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	fmt.Println("exit code", code)
	fmt.Println(lines[len(lines)-1])
	// Output:
	// exit code 0
	// 3 pods, 12 volumes, 3 global mounts, 6 volumes in use, 0 findings; mount table consistent (/proc/self/mountinfo, 14 entries)
}
