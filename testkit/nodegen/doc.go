// Package nodegen builds a synthetic Kubernetes node on disk for benchmarks
// and scale tests: a kubelet root with N pods of V volumes each, in a
// realistic mix (CSI PVCs in the current and the pre-1.24 staging layout with
// their vol_data.json files, raw block PVCs, an inline ephemeral CSI volume,
// projected and secret tmpfs volumes, emptyDir on disk and in memory,
// configMaps, subPath bind mounts), and a matching mountinfo padded to M
// lines with the container overlay, shm and cgroup entries that fill a busy
// node's table.
//
// Generate writes the tree under a directory used as the scan's host root
// and the mount table beside it, and returns what a correct scan must find
// (pods, volumes, global mounts, what is mounted) together with every
// directory and vol_data.json a scan has to read, so that a benchmark can
// replay that unavoidable I/O as a floor.
//
// It is for tests and benchmarks only. Every name is derived from the
// indexes, so the same Config always gives the same node. It is not a
// fixture format (see package fixture) and not a model of any one cloud:
// the mix is fixed per pod, whatever the sizes.
package nodegen
