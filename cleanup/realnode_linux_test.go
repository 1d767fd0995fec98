package cleanup_test

import "github.com/volrecon/volrecon/fakenode"

const (
	realUID1 = fakenode.UID1
	realUID2 = fakenode.UID2
	realUID3 = fakenode.UID3
)

// realNode is a kubelet root in a temp dir, scanned against the real
// /proc/self/mountinfo of a private mount namespace.
type realNode = fakenode.Node

var (
	newRealNode = fakenode.OnRealMounts
	volumeNamed = fakenode.VolumeNamed
	findingsOf  = fakenode.FindingsOf
)
