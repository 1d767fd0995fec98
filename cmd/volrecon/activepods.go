package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/podlist"
	"github.com/volrecon/volrecon/reconstruct"
)

// activePodsTimeout bounds reading --active-pods (podlist.Limits; the
// size bound is the package's default).
var activePodsTimeout = podlist.DefaultTimeout

// activePodsLimits are the bounds of a read of --active-pods, and the node
// its pods must be bound to: --node-name or $NODE_NAME, where given.
func activePodsLimits(nodeName string) podlist.Limits {
	return podlist.Limits{Timeout: activePodsTimeout, Node: cmp.Or(nodeName, os.Getenv("NODE_NAME"))}
}

// readActivePods reads --active-pods from a file, or from stdin for "-",
// with the pods' names where it gives them (kubectl's JSON).
func readActivePods(path string, stdin io.Reader, limits podlist.Limits) (*podlist.List, error) {
	var list *podlist.List
	var err error
	if path == "-" {
		list, err = podlist.ReadList(context.Background(), "stdin", stdin, limits)
	} else {
		list, err = podlist.ReadListFile(context.Background(), path, limits)
	}
	return list, activePodsError(err)
}

// activePodsError names the flag in an error of package podlist.
func activePodsError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("--active-pods %w", err)
}

// activePodsFile is --active-pods FILE, read again whenever it changed
// (podlist.File), its errors naming the flag.
type activePodsFile struct{ file *podlist.File }

func newActivePodsFile(path string, limits podlist.Limits) (*activePodsFile, error) {
	file, err := podlist.NewFile(context.Background(), path, limits)
	if err != nil {
		return nil, activePodsError(err)
	}
	return &activePodsFile{file: file}, nil
}

func (f *activePodsFile) ActivePods(ctx context.Context) ([]string, error) {
	keys, err := f.file.ActivePods(ctx)
	return keys, activePodsError(err)
}

// PodNames returns the names of the file's pods (reconstruct.PodNamer).
func (f *activePodsFile) PodNames() map[string]reconstruct.PodName { return f.file.PodNames() }

// Status is the file's, its error naming the flag (serve's /healthz).
func (f *activePodsFile) Status() podlist.FileStatus {
	st := f.file.Status()
	st.Err = activePodsError(st.Err)
	return st
}

// activePodsKeys starts an --active-pods value that gives the pod keys
// themselves, comma-separated: what a caller that cannot hand volrecon a
// file (kubectl volrecon, whose debug pod has no file of the user's and no
// stdin that ends) writes into the command line.
const activePodsKeys = "keys:"

// parseActivePodKeys parses the keys of --active-pods=keys:K1,K2,…;
// "keys:" alone is an empty list.
func parseActivePodKeys(value string) (reconstruct.PodList, error) {
	keys, err := kubelet.ParsePodKeys(strings.TrimPrefix(value, activePodsKeys))
	if err != nil {
		return nil, fmt.Errorf("--active-pods %s%w", activePodsKeys, err)
	}
	return keys, nil
}
