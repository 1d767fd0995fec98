package mountid

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// bootIDFile holds the boot ID: random, new at every boot of the kernel,
// the same in every namespace.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// ErrUnsupported: the kernel does not give unique mount IDs (before Linux
// 6.8: no listmount or statmount), or not to this process.
var ErrUnsupported = errors.New("the kernel gives no unique mount IDs here (listmount, statmount: Linux 6.8+)")

var bootIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// BootID returns the ID of the running boot of the kernel
// (/proc/sys/kernel/random/boot_id): mount IDs and devices, unique or
// not, mean something only within one boot of one node.
func BootID() (string, error) {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return "", fmt.Errorf("the boot ID: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if !bootIDPattern.MatchString(id) {
		return "", fmt.Errorf("the boot ID in %s is not a UUID: %q", bootIDFile, id)
	}
	return id, nil
}
