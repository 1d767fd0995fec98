// Package progress reports where a long run is (a scan of a large node
// with probes, a cleanup of thousands of actions, a teardown waiting for a
// CSI driver), and draws it on a terminal.
//
// The library sends Reports through a Func it is given (reconstruct.Options,
// cleanup.Options and cleanup.ExecOptions have a Progress field); nil sends
// nothing. A Terminal draws the latest report on one line of a terminal,
// and nothing at all where its file is not one, so that progress never
// mixes into a file, a pipe or a JSON document.
package progress
