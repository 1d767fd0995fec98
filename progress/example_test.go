package progress_test

import (
	"fmt"
	"os"
	"time"

	"github.com/volrecon/volrecon/progress"
)

// Draw progress on stderr only where it is a terminal: NewTerminal returns
// nil elsewhere, and a nil Terminal's Func sends nothing. Stop it before
// printing the result.
func ExampleNewTerminal() {
	term := progress.NewTerminal(os.Stderr, progress.TerminalOptions{})
	defer term.Stop()
	report := term.Func() // reconstruct.Options.Progress, cleanup.ExecOptions.Progress …
	report.Send(progress.Report{Step: "probing mounts", Done: 1, Total: 2, Item: "/var/lib/kubelet/pods/x/volumes/kubernetes.io~nfs/data"})
	term.Stop()
	fmt.Println(progress.Line(progress.Report{Step: "applying the plan", Done: 3, Total: 40, Item: "NodeUnstage /var/lib/kubelet/plugins/x"}, 12*time.Second, 80))
	// Output:
	// volrecon: applying the plan 3/40: NodeUnstage /var/lib/kubelet/plugins/x (12s)
}
