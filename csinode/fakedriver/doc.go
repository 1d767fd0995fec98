// Package fakedriver is an in-process CSI node driver for tests: it serves
// the Identity and Node services on a unix socket, records every call in
// order, and can be told to fail, stall or act (unmount in a test's mount
// namespace) on each call. ServeRegistration serves the kubelet's
// plugin-registration GetInfo, encoded here field by field so that the
// client's decoding is tested against an independent encoder.
//
// It is for tests of what talks to a CSI driver (cleanup's teardown through
// the driver, package csinode): an agent's test serves it at the socket a
// kubelet root names (plugins/<driver>/csi.sock, or a registration socket
// in plugins_registry/ with ServeRegistration). It links gRPC; the command
// links none of it (cmd/volrecon's TestDeps).
package fakedriver
