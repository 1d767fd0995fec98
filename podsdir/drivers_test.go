//go:build unix

package podsdir

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/volrecon/volrecon/kubelet"
)

// TestDriverRegistered: a driver is registered by its socket or by an entry
// of plugins_registry/ named after it, read under the host root with its
// symlinks resolved there; what cannot be told counts as registered.
func TestDriverRegistered(t *testing.T) {
	const driver = "ebs.csi.aws.com"
	many := make([]string, 0, kubelet.MaxRegistryEntries+1)
	for i := range kubelet.MaxRegistryEntries + 1 {
		many = append(many, fmt.Sprintf("f %s/plugins_registry/other-%d.sock", kroot, i))
	}
	for name, c := range map[string]struct {
		spec   []string
		driver string
		want   bool
	}{
		"nothing of it":                {spec: []string{"d " + kroot + "/plugins", "d " + kroot + "/plugins_registry"}},
		"no plugins dirs at all":       {spec: []string{"d " + kroot}},
		"its socket":                   {spec: []string{"s " + kroot + "/plugins/" + driver + "/csi.sock"}, want: true},
		"a dangling symlink as socket": {spec: []string{"l " + kroot + "/plugins/" + driver + "/csi.sock /gone"}, want: true},
		"its registration socket":      {spec: []string{"s " + kroot + "/plugins_registry/" + driver + "-reg.sock"}, want: true},
		"another driver's":             {spec: []string{"s " + kroot + "/plugins_registry/efs.csi.aws.com-reg.sock", "s " + kroot + "/plugins/efs.csi.aws.com/csi.sock"}},
		"plugins a symlink under the host root": {spec: []string{
			"l " + kroot + "/plugins /data/plugins", "s /data/plugins/" + driver + "/csi.sock"}, want: true},
		"plugins_registry a file":       {spec: []string{"f " + kroot + "/plugins_registry x"}, want: true},
		"plugins_registry too long":     {spec: many, want: true},
		"a name that is not a dir name": {spec: []string{"d " + kroot + "/plugins"}, driver: "../x", want: true},
		"no name":                       {spec: []string{"d " + kroot + "/plugins"}, driver: "-", want: true},
	} {
		t.Run(name, func(t *testing.T) {
			host := build(t, c.spec...)
			d := driver
			switch c.driver {
			case "":
			case "-":
				d = ""
			default:
				d = c.driver
			}
			assert.Equal(t, c.want, DriverRegistered(t.Context(), Options{RootDir: kroot, HostRoot: host}, d))
		})
	}
	// The root given as a symlink is resolved under the host root too.
	host := build(t, "l "+kroot+" /data/kubelet", "s /data/kubelet/plugins/"+driver+"/csi.sock")
	assert.True(t, DriverRegistered(t.Context(), Options{RootDir: kroot, HostRoot: host}, driver))
	assert.False(t, DriverRegistered(t.Context(), Options{RootDir: kroot, HostRoot: filepath.Join(host, "data")}, driver))
}

// Nothing is sent into a mount not to enter (Options.NotEntered): a
// plugins_registry/ or plugins/<driver> there cannot be told, so yes.
func TestDriverRegisteredEntersNoMountNotToEnter(t *testing.T) {
	const driver = "ebs.csi.aws.com"
	host := build(t, "d "+kroot+"/plugins/"+driver, "d "+kroot+"/plugins_registry")
	for _, fenced := range []string{kroot + "/plugins_registry", kroot + "/plugins/" + driver} {
		opts := Options{RootDir: kroot, HostRoot: host, NotEntered: map[string]string{fenced: "fuse.sshfs"}}
		assert.True(t, DriverRegistered(t.Context(), opts, driver), fenced)
	}
	assert.False(t, DriverRegistered(t.Context(), Options{RootDir: kroot, HostRoot: host}, driver))
}
