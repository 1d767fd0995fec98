package kubelet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/kubelet"
)

func TestStagingHash(t *testing.T) {
	// sha256 of "" and of "abc" (FIPS 180-2 test vector).
	assert.Equal(t, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", kubelet.StagingHash(""))
	assert.Equal(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", kubelet.StagingHash("abc"))
}

func TestNames(t *testing.T) {
	assert.Equal(t, "kubernetes.io/csi/ebs.csi.aws.com^vol-1", kubelet.UniqueVolumeName("ebs.csi.aws.com", "vol-1"))
	assert.Equal(t, kubelet.CSIPluginDirName, kubelet.EscapePluginName(kubelet.CSIPluginName))
	assert.Equal(t, kubelet.CSIPluginName, kubelet.UnescapePluginName(kubelet.CSIPluginDirName))
	assert.Equal(t, "kubernetes.io~empty-dir", kubelet.EscapePluginName("kubernetes.io/empty-dir"))
}

func TestIsPodUID(t *testing.T) {
	for name, want := range map[string]bool{
		"8f0c4d3e-1111-4b7a-9c2e-1f0a6b3d5c2e": true,  // API server UID
		"8F0C4D3E-1111-4B7A-9C2E-1F0A6B3D5C2E": true,  // either case
		"0123456789abcdef0123456789abcdef":     true,  // static pod: hex md5
		"8f0c4d3e-1111-4b7a-9c2e-1f0a6b3d5c2":  false, // one digit short
		"0123456789abcdef0123456789abcdeg":     false,
		"my-static-pod":                        false,
		"":                                     false,
	} {
		assert.Equal(t, want, kubelet.IsPodUID(name), name)
	}
}

// A list of pod keys takes UIDs and static pods' config hashes, skips
// blanks, and refuses anything else, naming it.
func TestParsePodKeys(t *testing.T) {
	uid, hash := "0f1e2d3c-4b5a-4697-8887-a9b8c7d6e5f4", "6c8e4b1c5e3a9d2f7b0a1c2d3e4f5a6b"
	keys, err := kubelet.ParsePodKeys(" " + uid + ",," + hash + " ,")
	require.NoError(t, err)
	assert.Equal(t, []string{uid, hash}, keys)
	keys, err = kubelet.ParsePodKeys("")
	require.NoError(t, err)
	assert.Equal(t, []string{}, keys, "empty, not nil: a list that names no pod")
	_, err = kubelet.ParsePodKeys(uid + ",web-0")
	assert.EqualError(t, err, `"web-0" is not a pod key (a pod UID or a static pod's config hash)`)
}
