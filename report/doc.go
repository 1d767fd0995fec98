// Package report turns a reconstruct.State, a cleanup plan and its results
// into the text tables volrecon prints, in a way that scales to nodes of
// a thousand pods: everything the table decides is here, so that an
// embedder prints what the command prints.
//
// A table shows the pods that need attention first and in full (a
// finding, an orphan, an Uncertain volume), each named namespace/name
// where the active pod list knows it, then one line for each other pod.
// Paths are relative to the kubelet root (a pod's actions to its pod dir),
// which the first line names. Findings are grouped by kind, with counts;
// Options.Wide lists each finding, every pod's volumes, every staging
// mount and every action of a plan. Options.Problems and Options.Pods
// filter what is shown (SelectPods resolves namespace/name to pod dirs).
//
// Every string from the node (a name a pod controls, a path, a message
// that holds them) goes through safetext.Quote, so it can neither forge a
// row nor reach the terminal; only words of volrecon's own vocabulary go
// through Options.Paint, for colour.
//
// WriteJSON writes a State or a plan as volrecon's -o json does, byte for
// byte what json.Encoder with an indent writes, without holding the whole
// document in memory.
package report
