// Command volrecon prints a Kubernetes node's volume state, rebuilt from the
// mount table and the kubelet root dir (package reconstruct), as a table or
// as JSON (schema volrecon.v1). `volrecon scan --demo` scans an embedded
// sample node, so it can be tried on any machine.
//
// It is not a kubelet and changes nothing on the node.
package main
