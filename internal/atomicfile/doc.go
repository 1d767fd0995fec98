// Package atomicfile replaces a file so that a reader sees the old content
// or the new, never a part, and so that the new content survives a crash
// once Write returns: it writes a temp file in the same dir, fsyncs it,
// renames it over the file and fsyncs the dir (the rename is an entry of
// the dir: without that fsync a crash may undo it).
//
// It is for volrecon's own small files (the textfile collector's metrics,
// the CSI teardown's record of unused staging mounts). It is not for files
// on the node's volumes: volrecon never writes there.
package atomicfile
