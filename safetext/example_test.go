package safetext_test

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/volrecon/volrecon/safetext"
)

// A volume named to forge a row of a table stays on its own row.
func ExampleRow() {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	_ = safetext.Row(w, "VOLUME", "STATE")
	_ = safetext.Row(w, "cache", "Unmounted")
	_ = safetext.Row(w, "x\nRmdir /var/lib/kubelet", "Unmounted")
	_ = w.Flush()
	// Output:
	// VOLUME                       STATE
	// cache                        Unmounted
	// "x\nRmdir /var/lib/kubelet"  Unmounted
}

func ExampleQuote() {
	fmt.Println(safetext.Quote("pvc-1"))
	fmt.Println(safetext.Quote("clear\x1b[2J"))
	// Output:
	// pvc-1
	// "clear\x1b[2J"
}
