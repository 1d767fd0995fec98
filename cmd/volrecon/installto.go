package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/volrecon/volrecon/internal/atomicfile"
)

const installToUsage = `Usage: volrecon install-to DIR

Copies this volrecon binary to DIR/volrecon (mode 0755), atomically: a
reader sees the whole binary or none. It is for an init container of
volrecon's image, which has no shell and no cp, that hands the binary to
another container through a shared emptyDir, e.g. node-problem-detector's
(deploy/npd/daemonset-patch.yaml):

  command: ["volrecon", "install-to", "/opt/volrecon"]
`

// installedName is the file install-to writes in DIR.
const installedName = "volrecon"

// selfExe is the running binary (Linux: the image's only platform).
const selfExe = "/proc/self/exe"

func runInstallTo(_ context.Context, args []string, e env) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(e.stdout, installToUsage)
		return nil
	}
	if len(args) != 1 || args[0] == "" || args[0][0] == '-' {
		fmt.Fprint(e.stderr, "volrecon install-to takes one argument, the dir\n\n"+installToUsage)
		return errUsage
	}
	// The running binary itself, not what its path names now (which an
	// update may have replaced).
	dest, err := installTo(selfExe, args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "installed %s\n", dest)
	return nil
}

// installTo copies the file at src to dir/volrecon, atomically
// (atomicfile: a temp file in dir, synced, renamed over it, the dir
// synced), and returns the path.
func installTo(src, dir string) (string, error) {
	dest := filepath.Join(dir, installedName)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return "", fmt.Errorf("install-to %s: %w", dir, err)
	}
	in, err := os.Open(src)
	if err == nil {
		err = atomicfile.WriteFrom(dest, in, 0o755)
		in.Close()
	}
	if err != nil {
		return "", fmt.Errorf("install-to %s: %w", dest, err)
	}
	return dest, nil
}
