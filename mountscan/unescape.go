package mountscan

import (
	"bytes"
	"strings"
)

// unescape decodes the octal escapes the kernel writes into mountinfo paths
// (\040 space, \011 tab, \012 newline, \134 backslash; in general a
// backslash and three octal digits up to \377). It makes one left-to-right
// pass, so the text `\134040` decodes to the four characters `\040` and is
// never decoded a second time into a space. A backslash that does not start
// such an escape is kept. The result is never longer than s, and s itself is
// returned, without allocating, when it has no backslash.
func unescape(s string) string {
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for ; i >= 0; i = strings.IndexByte(s, '\\') {
		b.WriteString(s[:i])
		if c, ok := octalByte(s[i+1:]); ok {
			b.WriteByte(c)
			s = s[i+4:]
		} else {
			b.WriteByte('\\')
			s = s[i+1:]
		}
	}
	b.WriteString(s)
	return b.String()
}

// unescapeInPlace decodes b as unescape does, writing the result over b
// from its start, and returns the length of the result. Decoding never
// lengthens text, so every byte is read before it is overwritten.
func unescapeInPlace(b []byte) int {
	i := bytes.IndexByte(b, '\\')
	if i < 0 {
		return len(b)
	}
	w := i
	for i < len(b) {
		if b[i] == '\\' && i+3 < len(b) {
			if c, ok := octalByte3(b[i+1], b[i+2], b[i+3]); ok {
				b[w] = c
				w++
				i += 4
				continue
			}
		}
		b[w] = b[i]
		w++
		i++
	}
	return w
}

// octalByte decodes three octal digits at the start of s. Values above \377
// do not fit a byte and are not escapes.
func octalByte(s string) (byte, bool) {
	if len(s) < 3 {
		return 0, false
	}
	return octalByte3(s[0], s[1], s[2])
}

func octalByte3(a, b, c byte) (byte, bool) {
	if a < '0' || a > '3' || !isOctal(b) || !isOctal(c) {
		return 0, false
	}
	return (a-'0')<<6 | (b-'0')<<3 | (c - '0'), true
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
