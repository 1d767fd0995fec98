//go:build linux

// Package taskholder starts processes that hold a mount in a mount
// namespace the way the hard cases do: a second thread that unshared a
// namespace of its own (Go's LockOSThread pattern) and bind-mounted a dir
// there, a process whose main thread exited while another thread lives on,
// or a plain process in a namespace of its own. Each is this test binary
// run again, and dies with the test. It also puts a process in a cgroup
// named as the kubelet names a pod's, and takes it out again.
//
// It is for tests only, as root.
package taskholder
