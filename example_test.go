package volrecon_test

import (
	"bufio"
	"bytes"
	"fmt"

	"github.com/volrecon/volrecon"
)

// The fixtures are embedded: a test in any module can read them (the test
// kit fakenode loads them with their options).
func Example() {
	data, err := volrecon.Fixtures.ReadFile("testdata/ebs-current.txtar")
	if err != nil {
		fmt.Println(err)
		return
	}
	first, _ := bufio.NewReader(bytes.NewReader(data)).ReadString(':')
	fmt.Println(first)
	// Output: An EBS-like node in the current CSI layout (Kubernetes >= 1.24):
}
