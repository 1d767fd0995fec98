package k8sbuild

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const k8sGoModSample = `module k8s.io/kubernetes

go 1.22.0

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/kube-scheduler => ./staging/src/k8s.io/kube-scheduler
	k8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
)
`

// v1.31.14's k8s.io/kube-scheduler is not served: the wrapper takes
// v0.31.13; every other staging module its own patch; another release
// is untouched.
func TestWrapperGoModPinsUnservedStaging(t *testing.T) {
	mod, err := wrapperGoMod([]byte(k8sGoModSample), "v1.31.14")
	require.NoError(t, err)
	assert.Contains(t, string(mod), "\tk8s.io/kube-scheduler => k8s.io/kube-scheduler v0.31.13\n")
	assert.Contains(t, string(mod), "\tk8s.io/api => k8s.io/api v0.31.14\n")
	assert.NotContains(t, string(mod), "sample-controller")
	mod, err = wrapperGoMod([]byte(k8sGoModSample), "v1.34.4")
	require.NoError(t, err)
	assert.Contains(t, string(mod), "\tk8s.io/kube-scheduler => k8s.io/kube-scheduler v0.34.4\n")
}

// A wrapper is tidied for the commands asked for and those it was tidied
// for before: the .tidy of every release built so far (all four commands)
// still counts, and a kubelet-only wrapper imports the kubelet alone.
func TestToolsGoCommands(t *testing.T) {
	all := []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"}
	assert.Equal(t, all, toolsCommands(toolsGo(all)))
	kubelet := toolsGo([]string{"kubelet"})
	assert.Equal(t, []string{"kubelet"}, toolsCommands(kubelet))
	assert.False(t, strings.Contains(kubelet, "kube-controller-manager"))
	assert.Equal(t, all, unionSorted(toolsCommands(kubelet), []string{"kube-scheduler", "kube-controller-manager", "kube-apiserver", "kubelet"}))
}
