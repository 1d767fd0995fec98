//go:build linux

// Package testmountns lets tests make real mounts (tmpfs, bind, ext4 on a loop
// device, FUSE) safely: each such test runs again in a child process inside
// a private mount namespace, so its mounts never reach the host's and vanish
// with the child even if a cleanup fails. Without root the tests skip.
//
// It is for tests only.
package testmountns
