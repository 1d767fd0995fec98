// Package volrecon is the module's front page; the library is in the
// packages below it. reconstruct rebuilds a node's volume state from the
// mount table and the kubelet's root dir; cleanup plans and applies the
// safe cleanup of orphaned pod dirs, through the CSI driver where only the
// driver may; kubelet holds the kubelet's on-disk layout and the host;
// mountscan reads mount tables; podsdir inventories the kubelet root;
// liveness gathers evidence of life; kube reads the API server; serve is
// the node daemon; metrics, report and verdict turn a State into metrics,
// tables and a check's verdict. fakenode is the test kit for agents, with
// the repository's node fixtures embedded. See README.md.
//
// This package has no code: the command and the library link nothing of it.
package volrecon
