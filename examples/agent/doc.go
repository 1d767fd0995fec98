// Package agent is the start-up of a kubelet-like node agent: before it
// mounts or unmounts anything, it rebuilds what is already on the node from
// the mount table and the kubelet root (volrecon's reconstruct.Scan), and
// sorts it into what it adopts, what it must leave alone until it is
// certain, what must not be detached, and what needs its CSI driver.
//
// Its tests (agent_test.go) run on fake nodes of volrecon's test kit
// (fakenode: CSI volumes of both layouts and raw block, its unmount and
// its injected errors of the table's read and of a mount's check), on an
// agent's usual mount-utils FakeMounter (mountutil.ForFakeMounter) and on
// the repository's fixtures, without root.
package agent
