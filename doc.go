// Package volrecon holds the node fixtures of the repository's testdata/
// (Fixtures), embedded, so that the test kit fakenode can load them from
// any module. The library is in the packages below it: reconstruct (the
// node's volume state), cleanup (the safe cleanup of orphaned pod dirs),
// mountscan, podsdir, mountutil, kube, liveness, csinode, metrics, podlist
// and safetext; fakenode and csinode/fakedriver are for tests. See
// README.md.
//
// Only fakenode imports this package: neither the command nor any other
// package of the library links the fixtures.
package volrecon
