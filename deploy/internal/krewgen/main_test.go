package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tmpl = `spec:
  version: v0.1.0
  platforms:
    - uri: https://example.com/download/v0.1.0/x_v0.1.0_linux_amd64.tar.gz
      sha256: "0000000000000000000000000000000000000000000000000000000000000000"
    - uri: https://example.com/download/v0.1.0/x_v0.1.0_linux_arm64.tar.gz
      sha256: "0000000000000000000000000000000000000000000000000000000000000000"
`

func TestGenerate(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	got, err := generate(tmpl, "v1.2.3", map[string]string{
		"x_v1.2.3_linux_amd64.tar.gz": a, "x_v1.2.3_linux_arm64.tar.gz": b})
	require.NoError(t, err)
	assert.Equal(t, `spec:
  version: v1.2.3
  platforms:
    - uri: https://example.com/download/v1.2.3/x_v1.2.3_linux_amd64.tar.gz
      sha256: "`+a+`"
    - uri: https://example.com/download/v1.2.3/x_v1.2.3_linux_arm64.tar.gz
      sha256: "`+b+`"
`, got)
}

// An archive the sums do not name is an error, never a zero checksum.
func TestGenerateRefusesAMissingArchive(t *testing.T) {
	_, err := generate(tmpl, "v1.2.3", map[string]string{"x_v1.2.3_linux_amd64.tar.gz": strings.Repeat("a", 64)})
	require.ErrorContains(t, err, "x_v1.2.3_linux_arm64.tar.gz")
	require.ErrorContains(t, run("../../krew/volrecon.yaml", "/nonexistent", "dev", "/dev/null"), "semantic version")
}
