package reconstruct

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The forms of iscsi.go GetVolumeName (portal:iqn:lun) and fc.go
// GetVolumeName ("%v" of the WWN or WWID slice), from the last element of
// the global mount path the kubelet's ConstructVolumeSpec parses (the cases
// of fc_util_test.go TestParsePDName among them).
func TestInTreeVolumeName(t *testing.T) {
	tests := []struct {
		plugin, device, want string
		wantErr              bool
	}{
		{iscsiPluginName, "10.0.0.1:3260-iqn.2001-04.com.example:storage.disk1-lun-0", "10.0.0.1:3260:iqn.2001-04.com.example:storage.disk1:0", false},
		{iscsiPluginName, "[fd00::1]:3260-eui.02004567A425678D-lun-12", "[fd00::1]:3260:eui.02004567A425678D:12", false},
		{iscsiPluginName, "10.0.0.1:3260-iqn.2001-04.com.example:disk", "", true},  // no lun
		{iscsiPluginName, "10.0.0.1:3260-target-lun-0", "", true},                  // no iqn. or eui.
		{iscsiPluginName, "10.0.0.1:3260-iqn.2001-04.com.example-lun-x", "", true}, // lun not a number
		{fcPluginName, "60050763008084e6e0000000000001ae", "[60050763008084e6e0000000000001ae]", false},
		{fcPluginName, "60050763008084e6e0000000000001ae-60050763008084e6e0000000000001af",
			"[60050763008084e6e0000000000001ae 60050763008084e6e0000000000001af]", false},
		{fcPluginName, "50050768030539b6-lun-0", "[50050768030539b6]:0", false},
		{fcPluginName, "50050768030539b6-50050768030539b7-lun-0", "[50050768030539b6 50050768030539b7]:0", false},
		{fcPluginName, "lun-0", "", true},
		{fcPluginName, "50050768030539b6-lun-x", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.device, func(t *testing.T) {
			got, err := inTreeVolumeName(tt.plugin, tt.device)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
