package mountscan_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/volrecon/volrecon/mountscan"
)

// TestSuperblockReadOnly: the superblock is read-only by its flag ("ro",
// first) or by ext4's emergency_ro of Linux 6.18; an option that merely
// holds the word (a quoted value, another name) is not.
func TestSuperblockReadOnly(t *testing.T) {
	for _, c := range []struct {
		super, want string
	}{
		{"rw,errors=remount-ro", ""},
		{"ro,errors=remount-ro", "ro"},
		{"rw,errors=remount-ro,emergency_ro", "emergency_ro"},
		{"rw,errors=remount-ro", ""},
		{`rw,context="system_u:object_r:x:s0:c1,ro"`, ""},
		{"rw,noemergency_ro,rox", ""},
	} {
		m := mountscan.Mount{Options: "rw,relatime", SuperOptions: c.super}
		assert.Equal(t, c.want, m.SuperblockReadOnly(), c.super)
	}
	assert.True(t, mountscan.Mount{Options: "rw,relatime"}.MountReadWrite())
	assert.False(t, mountscan.Mount{Options: "ro,relatime"}.MountReadWrite())
}
