package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
)

// TestImageLoadsIntoDocker (issue 20, item 2): the tarball of `make image`
// is one that `docker load` accepts, as well as `ctr images import`
// (TestDaemonSet): Debian's dockerd, run by the suite as a plain process
// with no network of its own, loads it under the reference make image
// named, keeps its OCI labels, and runs the binary in it.
func TestImageLoadsIntoDocker(t *testing.T) {
	c := needCluster(t)
	version, err := cluster.EnsureDocker(ctxT(t))
	require.NoError(t, err)
	image := makeImage(t)
	host, err := c.StartDocker(ctxT(t), filepath.Join(t.TempDir(), "docker"))
	t.Cleanup(func() { assert.NoError(t, c.StopDocker()) })
	require.NoError(t, err)
	t.Logf("docker.io %s", version)
	docker := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctxT(t), "/usr/bin/docker", append([]string{"--host=" + host}, args...)...).CombinedOutput()
		require.NoError(t, err, "docker %s:\n%s", strings.Join(args, " "), out)
		return strings.TrimSpace(string(out))
	}

	assert.Contains(t, docker("load", "--input", image.tarball), "Loaded image: "+image.ref)
	var labels map[string]string
	require.NoError(t, json.Unmarshal([]byte(docker("image", "inspect", "--format", "{{json .Config.Labels}}", image.ref)), &labels))
	assert.Equal(t, "volrecon", labels["org.opencontainers.image.title"])
	tag := image.ref[strings.LastIndex(image.ref, ":")+1:]
	assert.Equal(t, tag, labels["org.opencontainers.image.version"], "the version label is the tag")

	start := time.Now()
	out := docker("run", "--rm", "--network=none", image.ref, "version")
	t.Logf("docker run %s version (%s): %s", image.ref, time.Since(start).Round(time.Millisecond), out)
	assert.True(t, strings.HasPrefix(out, "volrecon "), "the image's entrypoint is volrecon: %q", out)
	if rev := labels["org.opencontainers.image.revision"]; len(rev) >= 12 {
		assert.Contains(t, out, "commit "+rev[:12], "make build stamps the commit the revision label names")
	}
}
