package cleanup_test

import "github.com/volrecon/volrecon/internal/kubeletdir"

const (
	realUID1 = kubeletdir.UID1
	realUID2 = kubeletdir.UID2
	realUID3 = kubeletdir.UID3
)

// realNode is a kubelet root in a temp dir, scanned against the real
// /proc/self/mountinfo of a private mount namespace.
type realNode = kubeletdir.Dir

var (
	newRealNode = kubeletdir.New
	volumeNamed = kubeletdir.VolumeNamed
	findingsOf  = kubeletdir.FindingsOf
)
