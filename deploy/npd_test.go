package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/verdict"
)

const (
	npdConfigFile = "npd/volrecon-plugin-monitor.json"
	npdRBACFile   = "npd/rbac.yaml"
)

// ---- node-problem-detector's custom plugin monitor config ----
//
// The types mirror NPD's config (pkg/custompluginmonitor/types: CustomPluginConfig,
// pluginGlobalConfig, CustomRule; pkg/types: Condition), field for field
// with its JSON names, so that a strict decode catches a field NPD would
// silently ignore. NPD is neither on the Go module proxy nor packaged
// here; its defaults and checks (ApplyConfiguration, Validate) are below.

type npdCondition struct {
	Type         string    `json:"type"`
	Status       string    `json:"status"`
	Transition   time.Time `json:"transition"`
	Reason       string    `json:"reason"`
	Message      string    `json:"message"`
	TaintEnabled bool      `json:"taintEnabled"`
	TaintKey     string    `json:"taintKey"`
	TaintValue   string    `json:"taintValue"`
	TaintEffect  string    `json:"taintEffect"`
}

type npdRule struct {
	Type           string   `json:"type"`
	Condition      string   `json:"condition"`
	Reason         string   `json:"reason"`
	Path           string   `json:"path"`
	Args           []string `json:"args"`
	Timeout        *string  `json:"timeout"`
	InvokeInterval *string  `json:"invoke_interval,omitempty"`
}

type npdGlobalConfig struct {
	InvokeInterval                          *string `json:"invoke_interval,omitempty"`
	Timeout                                 *string `json:"timeout,omitempty"`
	MaxOutputLength                         *int    `json:"max_output_length,omitempty"`
	Concurrency                             *int    `json:"concurrency,omitempty"`
	EnableMessageChangeBasedConditionUpdate *bool   `json:"enable_message_change_based_condition_update,omitempty"`
	SkipInitialStatus                       *bool   `json:"skip_initial_status,omitempty"`
}

type npdConfig struct {
	Plugin           string          `json:"plugin,omitempty"`
	PluginConfig     npdGlobalConfig `json:"pluginConfig,omitempty"`
	Source           string          `json:"source"`
	Conditions       []npdCondition  `json:"conditions"`
	Rules            []*npdRule      `json:"rules"`
	MetricsReporting *bool           `json:"metricsReporting,omitempty"`
}

// NPD's defaults (pkg/custompluginmonitor/types/config.go) and the most a
// plugin may write before NPD stops reading (plugin.go, 4 KiB).
const (
	npdDefaultTimeout         = 5 * time.Second
	npdDefaultMaxOutputLength = 80
	npdMaxPluginBufferBytes   = 4 << 10
)

// monitor is a config with NPD's defaults applied, as NPD runs it.
type monitor struct {
	config          npdConfig
	timeout         time.Duration // the global timeout
	maxOutputLength int
}

// ruleTimeout is the time NPD gives a rule: its own timeout when shorter
// than the global one, else the global one.
func (m *monitor) ruleTimeout(r *npdRule) time.Duration {
	if r.Timeout != nil {
		if d, err := time.ParseDuration(*r.Timeout); err == nil && d < m.timeout {
			return d
		}
	}
	return m.timeout
}

// parseNPDConfig decodes a config strictly and checks it as NPD does at
// start-up, where a mistake kills NPD.
func parseNPDConfig(data []byte) (*monitor, error) {
	var c npdConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	m := &monitor{config: c, timeout: npdDefaultTimeout, maxOutputLength: npdDefaultMaxOutputLength}
	if s := c.PluginConfig.Timeout; s != nil {
		d, err := time.ParseDuration(*s)
		if err != nil {
			return nil, fmt.Errorf("global timeout %q: %w", *s, err)
		}
		m.timeout = d
	}
	if s := c.PluginConfig.InvokeInterval; s != nil {
		if _, err := time.ParseDuration(*s); err != nil {
			return nil, fmt.Errorf("invoke_interval %q: %w", *s, err)
		}
	}
	if n := c.PluginConfig.MaxOutputLength; n != nil {
		m.maxOutputLength = *n
	}
	if c.Plugin != "custom" {
		return nil, fmt.Errorf("plugin %q: NPD supports only \"custom\"", c.Plugin)
	}
	for _, r := range c.Rules {
		if err := m.checkRule(r); err != nil {
			return nil, fmt.Errorf("rule %s: %w", r.Reason, err)
		}
	}
	return m, nil
}

func (m *monitor) checkRule(r *npdRule) error {
	if r.Timeout != nil {
		d, err := time.ParseDuration(*r.Timeout)
		if err != nil {
			return fmt.Errorf("timeout %q: %w", *r.Timeout, err)
		}
		if d > m.timeout {
			return fmt.Errorf("timeout %s is greater than the global timeout %s", d, m.timeout)
		}
	}
	switch r.Type {
	case "temporary":
	case "permanent":
		if !slices.ContainsFunc(m.config.Conditions, func(c npdCondition) bool { return c.Type == r.Condition }) {
			return fmt.Errorf("permanent problem %s has no default condition", r.Condition)
		}
	default:
		return fmt.Errorf("type %q (want temporary or permanent)", r.Type)
	}
	return nil
}

func loadNPDConfig(t *testing.T) *monitor {
	t.Helper()
	m, err := parseNPDConfig([]byte(readFile(t, npdConfigFile)))
	require.NoError(t, err)
	return m
}

// The sample config is what NPD accepts, and its one rule runs volrecon
// check on the host as the DaemonSet sees it, answering before NPD's
// timeout and within NPD's output length.
func TestNPDConfig(t *testing.T) {
	m := loadNPDConfig(t)
	require.Len(t, m.config.Rules, 1)
	r := m.config.Rules[0]
	assert.Equal(t, "permanent", r.Type, "a condition on the Node, not only Events")
	assert.Equal(t, "check", r.Args[0])
	assert.Equal(t, "/opt/volrecon/volrecon", r.Path, "where docs/fleet.md mounts the binary")
	assert.Equal(t, hostRootMount, checkFlag(t, r.Args, "host-root"))
	assert.Equal(t, "/proc/1/mountinfo", checkFlag(t, r.Args, "mountinfo"), "the host's table: NPD's pod needs hostPID")
	assert.Equal(t, "api", checkFlag(t, r.Args, "active-pods"), "the node's pods, from the API server: without them no orphan is judged")

	timeout, err := time.ParseDuration(checkFlag(t, r.Args, "timeout"))
	require.NoError(t, err)
	assert.Less(t, timeout, m.ruleTimeout(r), "check must answer before NPD kills it")
	assert.Equal(t, strconv.Itoa(m.maxOutputLength), checkFlag(t, r.Args, "max-output-length"), "the line must fit what NPD keeps")

	_, err = verdict.ParseKinds(checkFlag(t, r.Args, "kinds"))
	require.NoError(t, err, "every kind is one volrecon knows")
	_, err = verdict.ParseSeverity(checkFlag(t, r.Args, "fail-on"))
	require.NoError(t, err)
}

// NPD's ServiceAccount may list pods and CSIDrivers, what check
// --active-pods=api asks, and nothing else.
func TestNPDRBACIsReadOnly(t *testing.T) {
	text := readFile(t, npdRBACFile)
	m, err := decodeManifests(text)
	require.NoError(t, err)
	require.Nil(t, m.daemonSet)
	require.Nil(t, m.serviceAccount, "NPD's own")
	require.Len(t, m.roles, 1)
	require.Len(t, m.bindings, 1)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csidrivers"}, Verbs: []string{"list"}},
	}, m.roles[0].Rules)
	assertBinds(t, m.bindings[0], m.roles[0], &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: "node-problem-detector", Namespace: "kube-system"}})
	_, err = decodeManifests(mutate(t, text, "verbs:", "verb:"))
	require.Error(t, err, "strict: a misspelt field is an error, not a rule quietly dropped")
}

// checkFlag is the value of --name=value in args.
func checkFlag(t *testing.T, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	t.Fatalf("no --%s= in %q", name, args)
	return ""
}

// A mistake NPD would refuse at start-up, or silently ignore, fails the
// decode.
func TestNPDConfigRejectsMistakes(t *testing.T) {
	good := readFile(t, npdConfigFile)
	for name, bad := range map[string]string{
		"a misspelled field":             mutate(t, good, `"max_output_length"`, `"maxOutputLength"`),
		"a misspelled rule field":        mutate(t, good, `"condition": "VolumeStateProblem"`, `"conditon": "VolumeStateProblem"`),
		"a rule timeout past the global": mutate(t, good, `"timeout": "30s"`+"\n    }\n  ]", `"timeout": "31s"`+"\n    }\n  ]"),
		"a bad duration":                 mutate(t, good, `"invoke_interval": "60s"`, `"invoke_interval": "1 minute"`),
		"a condition without a default":  mutate(t, good, `"type": "VolumeStateProblem"`, `"type": "VolumeProblem"`),
		"another plugin":                 mutate(t, good, `"plugin": "custom"`, `"plugin": "filelog"`),
		"an unknown rule type":           mutate(t, good, `"type": "permanent"`, `"type": "perm"`),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseNPDConfig([]byte(bad))
			assert.Error(t, err)
		})
	}
}

// ---- the plugin, run as NPD runs it ----

// pluginResult is what NPD makes of one run of a plugin.
type pluginResult struct {
	status  int // 0 OK, 1 NonOK, 2 Unknown
	message string
	raw     string // stdout as NPD read it, trimmed
}

// runAsNPD runs a plugin as NPD's plugin monitor does (plugin/plugin.go,
// util/exec_unix.go): in a process group of its own, stdout and stderr
// each read up to 4 KiB and the rest drained, the whole group killed
// (SIGKILL) at the rule's timeout; stdout trimmed of white space, replaced
// by a timeout message when killed, and cut to max_output_length bytes;
// exit code 0 is OK, 1 NonOK, anything else (a kill too) Unknown.
func runAsNPD(t *testing.T, m *monitor, r *npdRule) pluginResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), m.ruleTimeout(r))
	defer cancel()
	cmd := exec.Command(r.Path, r.Args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var killed bool
	var mu sync.Mutex
	waited := make(chan struct{})
	defer close(waited)
	go func() {
		select {
		case <-ctx.Done():
			mu.Lock()
			killed = true
			mu.Unlock()
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-waited:
		}
	}()
	var out, errOut []byte
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); out = readCapped(stdout) }()
	go func() { defer wg.Done(); errOut = readCapped(stderr) }()
	wg.Wait()
	waitErr := cmd.Wait()
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		t.Fatalf("wait: %v", waitErr)
	}
	t.Logf("plugin stderr: %s", errOut)
	output := strings.TrimSpace(string(out))
	res := pluginResult{raw: output}
	mu.Lock()
	if killed {
		output = fmt.Sprintf("Timeout when running plugin %q: state - %s. output - %q", r.Path, cmd.ProcessState, output)
	}
	mu.Unlock()
	if len(output) > m.maxOutputLength {
		output = output[:m.maxOutputLength]
	}
	res.message = output
	switch code := cmd.ProcessState.Sys().(syscall.WaitStatus).ExitStatus(); code {
	case 0, 1:
		res.status = code
	default:
		res.status = 2
	}
	return res
}

func readCapped(r io.Reader) []byte {
	data, _ := io.ReadAll(io.LimitReader(r, npdMaxPluginBufferBytes))
	_, _ = io.Copy(io.Discard, r)
	return data
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// volreconBinary builds the volrecon command of this repository, once.
func volreconBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "volrecon-npd-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "volrecon")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/volrecon")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w: %s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		_ = os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

// fixtureRule is the sample config's rule pointed at a fixture node: the
// built binary, the config's own arguments, then the flags that put the
// node where the fixture is (later flags win), and extra. The API server's
// answer to --active-pods=api is a file of pod UIDs given in extra
// (podsFile).
func fixtureRule(t *testing.T, m *monitor, name string, extra ...string) *npdRule {
	t.Helper()
	r := *m.config.Rules[0]
	r.Path = volreconBinary(t)
	f, err := fakenode.LoadFixture(fakenode.Fixtures(), name+".txtar")
	require.NoError(t, err)
	host := t.TempDir()
	require.NoError(t, f.Materialize(host))
	reads := f.MountInfoReads()
	require.Len(t, reads, 1)
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(mountinfo, reads[0], 0o600))
	r.Args = append(slices.Clone(r.Args), "--host-root="+host, "--mountinfo="+mountinfo, "--evidence-of-life=false")
	r.Args = append(r.Args, extra...)
	return &r
}

// podsFile is "--active-pods=FILE" of a file that lists uids: what the
// API server would answer for the node.
func podsFile(t *testing.T, uids ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pods")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(uids, "\n")+"\n"), 0o600))
	return "--active-pods=" + file
}

// unreachableKubeconfig is a kubeconfig of an API server that refuses
// every connection: a loopback port nothing listens on.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	file := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(file, []byte(`apiVersion: v1
kind: Config
clusters:
- name: refused
  cluster:
    server: https://`+addr+`
    insecure-skip-tls-verify: true
users:
- name: npd
  user:
    token: not-a-token
contexts:
- name: refused
  context:
    cluster: refused
    user: npd
current-context: refused
`), 0o600))
	return file
}

// volrecon check keeps NPD's plugin contract on fixture nodes, run exactly
// as NPD runs the sample config's rule: a leaked staging mount and an
// orphan still mounted are problems (exit 1), a clean node OK (0); a mount
// table that cannot be read, a scan that does not finish in time, the
// node's pods not given or not to be had (the orphan's mounts then say
// nothing) are unknown (2); each answer is one line that NPD keeps whole,
// given before NPD's timeout.
func TestCheckKeepsNPDsPluginContract(t *testing.T) {
	m := loadNPDConfig(t)
	missing := filepath.Join(t.TempDir(), "no-such-mountinfo")
	fifo := filepath.Join(t.TempDir(), "pods.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	demoPods := []string{"0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", "2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c", "7f8e9d0c-1b2a-4c3d-8e5f-6a7b8c9d0e1f"}
	tests := []struct {
		name, fixture string
		extra         []string
		status        int
		prefix        string
	}{
		{"leaked staging mounts", "a7-leaked-staging", []string{podsFile(t)}, 1, "3 findings: LeakedGlobalMount x3; first: plugins/kubernetes.io/csi/"},
		{"a clean node", "ebs-current", []string{podsFile(t, demoPods...)}, 0, "OK: no finding at warning or above (3 pods, "},
		{"an orphan still mounted", "ebs-current", []string{podsFile(t, demoPods[1:]...)}, 1,
			"1 finding: OrphanedPodMounted; first: pods/" + demoPods[0]},
		{"the node's pods not given", "ebs-current", []string{"--active-pods="}, 2,
			"unknown: orphans cannot be judged without the node's pods (--active-pods=api)"},
		{"the node's pods not to be had", "ebs-current", []string{"--node-name=" + fakenode.NodeName, "--kubeconfig=" + unreachableKubeconfig(t)}, 2,
			"unknown: active pods: "},
		{"a mount table that cannot be read", "ebs-current", []string{podsFile(t, demoPods...), "--mountinfo=" + missing}, 2, "unknown: the mount table /"},
		{"a scan past its --timeout", "ebs-current", []string{"--active-pods=" + fifo, "--timeout=1s"}, 2,
			"unknown: the scan did not finish within --timeout 1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := fixtureRule(t, m, tc.fixture, tc.extra...)
			start := time.Now()
			res := runAsNPD(t, m, r)
			assert.Less(t, time.Since(start), m.ruleTimeout(r), "answered before NPD's timeout")
			assert.Equal(t, tc.status, res.status, res.message)
			assert.True(t, strings.HasPrefix(res.message, tc.prefix), "%q does not start with %q", res.message, tc.prefix)
			assert.Equal(t, res.raw, res.message, "one line that NPD keeps whole")
			assert.NotContains(t, res.raw, "\n")
		})
	}
}

// npdPatchFile is the strategic merge patch that adds the plugin to NPD's
// DaemonSet.
const npdPatchFile = "npd/daemonset-patch.yaml"

// The patch, decoded strictly as a DaemonSet, puts the binary where the
// rule runs it (the init container's install-to into an emptyDir that NPD's
// container mounts at the rule's dir), with the image the DaemonSet runs,
// and gives NPD's pod what the rule reads: hostPID (/proc/1/mountinfo), the
// host's / at --host-root, read-only, HostToContainer. (Module image/
// runs the init container's command and the rule in the image's
// filesystem: TestNPDRecipeRunsInTheImage.)
func TestNPDDaemonSetPatch(t *testing.T) {
	var ds appsv1.DaemonSet
	require.NoError(t, decodeStrict([]byte(readFile(t, npdPatchFile)), &ds))
	spec := ds.Spec.Template.Spec
	assert.True(t, spec.HostPID, "/proc/1/mountinfo is the host's")
	rule := loadNPDConfig(t).config.Rules[0]
	binDir := filepath.Dir(rule.Path)
	require.Len(t, spec.InitContainers, 1)
	init := spec.InitContainers[0]
	assert.Equal(t, volreconContainer(t, loadManifests(t).daemonSet).Image, init.Image, "the DaemonSet's image")
	assert.Equal(t, []string{"volrecon", "install-to", binDir}, append(init.Command, init.Args...))
	assert.Equal(t, "volrecon", filepath.Base(rule.Path), "install-to writes DIR/volrecon")
	require.Len(t, spec.Containers, 1)
	assert.Equal(t, "node-problem-detector", spec.Containers[0].Name, "NPD's container, as its manifests name it")
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range spec.Containers[0].VolumeMounts {
		mounts[m.MountPath] = m
	}
	require.Len(t, init.VolumeMounts, 1)
	bin := init.VolumeMounts[0]
	assert.Equal(t, binDir, bin.MountPath)
	assert.NotNil(t, volumes[bin.Name].EmptyDir)
	assert.Equal(t, bin.Name, mounts[binDir].Name, "NPD's container sees what the init container wrote")
	assert.True(t, mounts[binDir].ReadOnly)
	host := mounts["/host"]
	assert.Contains(t, rule.Args, "--host-root=/host")
	assert.True(t, host.ReadOnly)
	require.NotNil(t, host.MountPropagation)
	assert.Equal(t, corev1.MountPropagationHostToContainer, *host.MountPropagation)
	require.NotNil(t, volumes[host.Name].HostPath)
	assert.Equal(t, "/", volumes[host.Name].HostPath.Path)
	assert.Contains(t, readFile(t, npdPatchFile), "--config.custom-plugin-monitor=/config/volrecon/"+filepath.Base(npdConfigFile))
	assert.Equal(t, "/config/volrecon", mounts["/config/volrecon"].MountPath)
}
