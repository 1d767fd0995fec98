//go:build linux

// Package mountns lets tests make real mounts (tmpfs, bind, ext4 on a loop
// device, FUSE) safely: each such test runs again in a child process inside
// a private mount namespace, so its mounts never reach the host's and vanish
// with the child even if a cleanup fails. Without root the tests skip.
//
// A test that reads every process of the machine (/proc whole) enters with
// EnterWithOwnProc instead: its child also gets a PID namespace of its own
// and that namespace's /proc, so it reads its own processes only, never
// other tests' mount tables, however many and however busy.
//
// It is for tests only.
package mountns
