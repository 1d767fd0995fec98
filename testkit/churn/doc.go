//go:build linux

// Command testchurn runs a command beside a mount churn of its own, to
// show that the command (the tests: make test-busy) does not depend on a
// quiet machine. In -namespaces mount namespaces of their own, each held by
// a process of its own, it mounts -mounts tmpfs and bind mounts, unmounts
// them, and again, without pause, from before the command starts until it
// ends: every such namespace has a table of thousands of entries that
// changes all the time, as other tests' namespaces do on a busy machine.
//
//	go run ./testkit/churn -namespaces 2 -mounts 2000 -- go test -race ./liveness
//
// It exits with the command's exit code, or 2 when the churn could not
// start or stopped early (then the run proves nothing). The mounts never
// reach the host's namespace: each namespace mounts a tmpfs of its own on
// its dir first and makes every mount point in it, so the host sees empty
// dirs, which it removes at the end; a namespace goes, with its mounts,
// when its process ends. -max-duration bounds the whole run: the command is
// killed when it is over.
//
// It is for tests only, as root.
package main
