// Package ptytest opens pseudo-terminal pairs for tests of what a command
// draws only on a terminal. Only tests import it.
package ptytest
