// Package kubeletdir builds a kubelet root dir in a test's temp dir and
// scans it against the real mount table of the test's private mount
// namespace, for the real-mount tests of reconstruct and cleanup.
//
// It is not for production code: every helper fails the test on error.
package kubeletdir
