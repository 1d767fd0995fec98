// Package kubelet is the one home of the kubelet's node as volrecon reads
// it: where the host's filesystem is (Host), and the kubelet's on-disk
// layout under its --root-dir: the names of its dirs and files, the paths
// it builds (Root, CSIDir), the staging dir's hash, a CSI volume's unique
// name, what a pod UID looks like, plugin-name escaping, the kinds of dirs
// of the layout with one classifier of a path (Kind, Classify), the
// entries the kubelet makes at the top of its root that volrecon never
// reads nor touches (KnownRootEntry), and one walk of the plugin registry
// (WalkRegistry).
//
// A new file or dir of the kubelet is added here, once; the readers
// (podsdir, nodewatch, csinode, cleanup, fakenode, the test node
// generators) spell no layout name themselves.
//
// It is not a reader of the node: it lists no pod dir and reads no
// vol_data.json (package podsdir does), watches nothing (nodewatch) and
// judges nothing (reconstruct, cleanup). A path's shape is never evidence
// of anything: the classifier says where a path lies in the layout, not
// what is mounted there. It imports only the standard library and
// internal/bounded, so every package of volrecon may use it.
package kubelet
