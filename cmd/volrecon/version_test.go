package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func buildInfo(mainVersion string, settings ...string) *debug.BuildInfo {
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/volrecon/volrecon", Version: mainVersion}}
	for i := 0; i+1 < len(settings); i += 2 {
		info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return info
}

// The version line names the version (stamped, else the module's, else
// dev), the Go version and the commit from the build info, +dirty when the
// tree had changes: what make build stamps and what go build records.
func TestVersionLine(t *testing.T) {
	const rev = "75659e4cd166f069216874cbaba1cc3c05348ca8"
	tests := []struct {
		name, stamped, commit string
		info                  *debug.BuildInfo
		want                  string
	}{
		{"stamped, clean tree", "v0.3.0", "", buildInfo("(devel)", "vcs.revision", rev, "vcs.modified", "false"),
			"volrecon v0.3.0 (go1.26.0, commit 75659e4cd166)"},
		{"not stamped, changed tree", "", "", buildInfo("(devel)", "vcs.revision", rev, "vcs.modified", "true"),
			"volrecon dev (go1.26.0, commit 75659e4cd166+dirty)"},
		{"go install of a tag", "", "", buildInfo("v0.2.1"), "volrecon v0.2.1 (go1.26.0, commit unknown)"},
		{"no vcs info (-buildvcs=false)", "v0.3.0", "", buildInfo("(devel)"), "volrecon v0.3.0 (go1.26.0, commit unknown)"},
		{"no build info", "", "", nil, "volrecon dev (commit unknown)"},
		{"a short revision", "", "", buildInfo("", "vcs.revision", "abc123"), "volrecon dev (go1.26.0, commit abc123)"},
		{"no vcs info, commit stamped (make build)", "v0.3.0", rev, buildInfo("(devel)"),
			"volrecon v0.3.0 (go1.26.0, commit 75659e4cd166)"},
		{"no build info, commit stamped", "", rev, nil, "volrecon dev (commit 75659e4cd166)"},
		{"the build info's commit first", "", "0123456789abcdef", buildInfo("(devel)", "vcs.revision", rev, "vcs.modified", "true"),
			"volrecon dev (go1.26.0, commit 75659e4cd166+dirty)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, versionLine(tc.stamped, tc.commit, tc.info))
		})
	}
}

// version, --version and -version print the same line, and the version of
// this very binary.
func TestVersionSpellings(t *testing.T) {
	info, _ := debug.ReadBuildInfo()
	want := versionLine(version, commit, info) + "\n"
	require.True(t, strings.HasPrefix(want, "volrecon "))
	for _, arg := range []string{"version", "--version", "-version"} {
		code, out, errOut := runCLI(t, "", arg)
		assert.Equal(t, exitOK, code, errOut)
		assert.Equal(t, want, out, arg)
		assert.Contains(t, out, "commit ", arg)
	}
}

// A binary built as make build builds it, with the version and commit
// stamped, where go build records no VCS info (-buildvcs=false, as some
// build environments set): version and volrecon_build_info both say the
// stamped version and commit (issue 34: the metric said commit="").
func TestStampedBuildInVersionAndMetric(t *testing.T) {
	const ver, rev = "v9.8.7", "0123456789abcdef0123456789abcdef01234567"
	bin := filepath.Join(t.TempDir(), "volrecon")
	build := exec.Command("go", "build", "-buildvcs=false", "-trimpath",
		"-ldflags", "-X main.version="+ver+" -X main.commit="+rev, "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	out, err = exec.Command(bin, "version").Output()
	require.NoError(t, err)
	assert.Regexp(t, `^volrecon `+ver+` \(go[^,]+, commit `+rev[:commitLength]+`\)\n$`, string(out))

	hostRoot, mountinfo := demoNode(t)
	textfile := filepath.Join(t.TempDir(), "volrecon.prom")
	out, err = exec.Command(bin, "serve", "--host-root", hostRoot, "--mountinfo", mountinfo, "--textfile", textfile).CombinedOutput()
	require.NoError(t, err, "%s", out)
	text, err := os.ReadFile(textfile)
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`(?m)^volrecon_build_info\{commit="`+rev+`",goversion="go[^"]+",version="`+ver+`"\} 1$`), string(text))
}
