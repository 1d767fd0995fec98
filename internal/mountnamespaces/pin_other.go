//go:build !linux

package mountnamespaces

import (
	"context"
	"errors"
	"os"

	"github.com/volrecon/volrecon/mountscan"
)

// Mount namespaces are Linux's: elsewhere nothing is pinned or entered,
// and a made-up /proc (tests) is read through its tasks' files.

var errNotLinux = errors.New("mount namespaces are Linux's")

func openPin(path string) (pin, error) {
	return pin{}, &os.PathError{Op: "open", Path: path, Err: errNotLinux}
}

func kernelList(context.Context, int) ([]pin, error) { return nil, errNoKernelList }

func kernelListComplete() bool { return false }

func hasInitialCap(uint) bool { return false }

const readerThreadName = "volrecon-nsread"

func enterAndRead(context.Context, int, func(*mountscan.Table) []wantedBind, *handoff) (*mountscan.Table, error) {
	return nil, errCannotEnter
}

func dupPin(*os.File) (int, error) { return -1, errCannotEnter }

func sameFiles(int, int) (bool, error) { return false, errNotLinux }

func isProcfs(string) bool { return false }
