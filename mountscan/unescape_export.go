package mountscan

// Unescape decodes the octal escapes the kernel writes in mount table paths
// (\040 space, \011 tab, \012 newline, \134 backslash), as Parse does; other
// backslashes are kept. /proc/mounts, which k8s.io/mount-utils' List reads,
// escapes its paths the same way.
func Unescape(s string) string { return unescape(s) }
