// Command kubectl-volrecon is a kubectl plugin (krew's conventions: the
// binary kubectl-volrecon on PATH, run as `kubectl volrecon`) that scans a
// node's volume state from the operator's machine:
//
//	kubectl volrecon node NAME [--image IMAGE] [-n NAMESPACE] [scan flags]
//
// It runs `volrecon scan` on the node through `kubectl debug node/NAME
// --profile=sysadmin`: a pod on the node in the host's PID, network and IPC
// namespaces with the node's filesystem at /host, so the scan reads
// --host-root=/host and the host's mount table, /proc/1/mountinfo. The
// node's pods, which tell the scan what is orphaned, are listed first with
// the user's kubectl (the debug pod's ServiceAccount may not list pods) and
// written into the scan's command line (--active-pods=keys:UID,...). It
// prints the scan's output (the table, or -o wide / -o json) as the
// container writes it, exits with the scan's exit code, and deletes the
// debug pod (kubectl debug leaves it). It runs scan only: it never cleans.
//
// kubectl is $KUBECTL, else kubectl on PATH.
package main
