// Package podlist reads the pods that should exist on a node — the desired
// state a scan tells orphans by — from a file or a stream that a person or an
// agent wrote: one pod key per line (a pod UID, or a static pod's config
// hash; "#" starts a comment), or the JSON of
// `kubectl get pods -A --field-selector spec.nodeName=NODE -o json`, whose
// pods count under their UID and, for static pods, their config hash too
// (reconstruct.PodKeys: the kubelet names a static pod's dir by that hash,
// not by its mirror pod's UID).
//
// Every read is bounded (Limits): at most 256 MiB within 2 minutes by
// default, so /dev/zero is refused as too large (ErrTooLarge) and a FIFO
// without a writer as too slow (ErrTimeout). Every error is an *Error naming
// the file or stream, and the line for a line that is not a pod key.
//
// A node's list holds that node's pods only: kubectl's JSON whose pods are
// bound to several nodes (spec.nodeName), or to another node than
// Limits.Node, is refused (ErrOtherNode), since every pod dir of this node
// would look orphaned (List.CheckNode for a list parsed already).
//
// File is a reconstruct.PodSource over a file that is read again whenever it
// changed (size, modification time or inode), so a long-running scanner
// follows a list that an agent rewrites; a FIFO is read once. A read that
// fails makes ActivePods fail, so every pod is Unknown for that scan, never
// Orphaned; Status says how old the list is, for a health check.
//
// It is not for asking the API server (package kube), nor for deciding what
// is orphaned (package reconstruct).
package podlist
