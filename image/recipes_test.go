package main

// The recipes of deploy/ run in the image as they are written: the kubectl
// plugin's command line, and node-problem-detector's init container and
// rule, each run in a chroot of the image's root filesystem (its layers
// unpacked) with the image config's Env, as a container runtime runs a
// command that replaces the entrypoint: a name without a slash is looked
// up on the container's PATH, which is the image's. As root.

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

const (
	testNode  = "node-1"
	activeUID = "11111111-1111-4111-8111-111111111111"
	orphanUID = "22222222-2222-4222-8222-222222222222"
	// fakeKubectlEnv makes the test binary a fake kubectl (TestMain).
	fakeKubectlEnv = "VOLRECON_TEST_FAKE_KUBECTL"
)

func TestMain(m *testing.M) {
	if state := os.Getenv(fakeKubectlEnv); state != "" {
		os.Exit(fakeKubectl(state, os.Args[1:]))
	}
	code := m.Run()
	if builtDir != "" {
		_ = os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

// commands builds this repository's volrecon and kubectl-volrecon,
// static, once.
func commands(t *testing.T) (volrecon, plugin string) {
	t.Helper()
	buildOnce.Do(func() {
		if builtDir, buildErr = os.MkdirTemp("", "volrecon-image-"); buildErr != nil {
			return
		}
		for _, c := range []string{"volrecon", "kubectl-volrecon"} {
			cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(builtDir, c), "./cmd/"+c)
			cmd.Dir = ".."
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build ./cmd/%s: %w: %s", c, err, out)
				return
			}
		}
	})
	require.NoError(t, buildErr)
	return filepath.Join(builtDir, "volrecon"), filepath.Join(builtDir, "kubectl-volrecon")
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
}

// imageRoot builds the image of bin, unpacks its layers into a new dir and
// returns the dir and the image config's Env.
func imageRoot(t *testing.T, bin string) (string, []string) {
	t.Helper()
	o := testOptions(t, bin)
	_, err := write(o)
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(o.out, nil)
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		dest := filepath.Join(root, filepath.Clean("/"+hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(dest, os.FileMode(hdr.Mode)))
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(dest, data, os.FileMode(hdr.Mode)))
		default:
			t.Fatalf("%s: type %c in the image", hdr.Name, hdr.Typeflag)
		}
	}
	return root, cfg.Config.Env
}

// runIn runs argv in a chroot of root with env alone, as a runtime runs a
// container's command (chroot(8) looks argv[0] up on env's PATH, in root).
// Without a /proc of its own under root (the node's, which a test writes),
// it gets one, as from a runtime: a proc of a PID namespace of its own,
// in a mount namespace of its own.
func runIn(root string, env, argv []string) (stdout, stderr string, code int, err error) {
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		return "", "", 0, err
	}
	args := append([]string{chroot, root}, argv...)
	if _, err := os.Stat(filepath.Join(root, "proc")); errors.Is(err, os.ErrNotExist) {
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			return "", "", 0, err
		}
		if err := os.Mkdir(filepath.Join(root, "proc"), 0o555); err != nil {
			return "", "", 0, err
		}
		defer os.Remove(filepath.Join(root, "proc"))
		args = append([]string{unshare, "--mount", "--propagation=private", "--pid", "--fork", "--mount-proc=" + filepath.Join(root, "proc")}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return out.String(), errOut.String(), exitErr.ExitCode(), nil
	}
	return out.String(), errOut.String(), 0, err
}

// makeNode writes, under root, a node as kubectl debug's pod and NPD's
// see it: the host's / at /host with the kubelet's dirs of two pods, and
// the host's mount table at /proc/1/mountinfo, where the second pod's
// emptyDir is mounted.
func makeNode(t *testing.T, root string) {
	t.Helper()
	for _, uid := range []string{activeUID, orphanUID} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, "host/var/lib/kubelet/pods", uid, "volumes/kubernetes.io~empty-dir/cache"), 0o750))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "proc/1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/1/mountinfo"), []byte(
		"1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"+
			"30 1 0:40 / /var/lib/kubelet/pods/"+orphanUID+"/volumes/kubernetes.io~empty-dir/cache rw,relatime shared:2 - tmpfs tmpfs rw\n"), 0o644))
}

// podListJSON is the node's pods as the API server (and kubectl get -o
// json) lists them: the first pod only.
const podListJSON = `{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"7"},"items":[
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"default","uid":"` + activeUID + `"},
"spec":{"nodeName":"` + testNode + `","containers":[{"name":"a","image":"a"}]},"status":{"phase":"Running"}}]}`

// The plugin's exact command line runs in the image: kubectl volrecon
// node NAME, with a kubectl that lists the node's pods and, for kubectl
// debug, runs the command after -- in the image's root filesystem over a
// node, as the debug pod would. The scan finds the orphan (the pods'
// keys reached it), and the plugin prints the scan's output and exits
// with its code (not 127: volrecon is on the image's PATH).
func TestKubectlPluginRunsInTheImage(t *testing.T) {
	needRoot(t)
	volrecon, plugin := commands(t)
	root, env := imageRoot(t, volrecon)
	makeNode(t, root)
	state := t.TempDir()
	rootEnv, err := json.Marshal(map[string]any{"root": root, "env": env})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(state, "image.json"), rootEnv, 0o644))
	self, err := os.Executable()
	require.NoError(t, err)

	cmd := exec.Command(plugin, "node", testNode, "--image=volrecon:v9.9.9")
	cmd.Env = append(os.Environ(), "KUBECTL="+self, fakeKubectlEnv+"="+state)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	t.Logf("kubectl volrecon: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	scanCode, err := os.ReadFile(filepath.Join(state, "exit"))
	require.NoError(t, err, "kubectl debug ran")
	assert.Equal(t, "0", string(scanCode), "the scan ran in the image")
	assert.Equal(t, 0, cmd.ProcessState.ExitCode(), "the scan's exit code")
	debugArgs, err := os.ReadFile(filepath.Join(state, "debug-args"))
	require.NoError(t, err)
	assert.Equal(t, "debug node/"+testNode+" --profile=sysadmin --image=volrecon:v9.9.9 -- volrecon scan --host-root=/host --mountinfo=/proc/1/mountinfo --active-pods=keys:"+activeUID,
		string(debugArgs))
	assert.Regexp(t, `(?m)^pod `+orphanUID+` \(Orphaned, 1 mount point\): OrphanedPodRunning$`, out.String())
	assert.Regexp(t, `(?m)^-\s+`+activeUID+`\s+Active\s`, out.String())
	assert.FileExists(t, filepath.Join(state, "deleted"), "the debug pod deleted")
}

// fakeKubectl answers the plugin's kubectl calls (state: a dir for what
// it was asked and what the scan gave).
func fakeKubectl(state string, args []string) int {
	line := strings.Join(args, " ")
	const pod = "node-debugger-" + testNode + "-x7k2p"
	switch {
	case line == "get pods --all-namespaces --field-selector=spec.nodeName="+testNode+" --output=json":
		fmt.Print(podListJSON)
	case strings.HasPrefix(line, "debug node/"+testNode+" "):
		i := strings.Index(line, " -- ")
		if i < 0 {
			return 1
		}
		var img struct {
			Root string   `json:"root"`
			Env  []string `json:"env"`
		}
		data, err := os.ReadFile(filepath.Join(state, "image.json"))
		if err == nil {
			err = json.Unmarshal(data, &img)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		out, errOut, code, err := runIn(img.Root, img.Env, strings.Fields(line[i+4:]))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for name, data := range map[string]string{"debug-args": line, "logs": out + errOut, "exit": fmt.Sprint(code)} {
			if err := os.WriteFile(filepath.Join(state, name), []byte(data), 0o644); err != nil {
				return 1
			}
		}
		fmt.Printf("Creating debugging pod %s with container debugger on node %s.\n", pod, testNode)
	case line == "get pod/"+pod+" --output=jsonpath={.status.phase}":
		fmt.Print("Succeeded")
	case line == "logs --follow pod/"+pod+" --container=debugger":
		data, _ := os.ReadFile(filepath.Join(state, "logs"))
		os.Stdout.Write(data)
	case line == "get pod/"+pod+" --output=jsonpath={.status.containerStatuses[0].state.terminated.exitCode}":
		data, _ := os.ReadFile(filepath.Join(state, "exit"))
		os.Stdout.Write(data)
	case strings.HasPrefix(line, "delete pod/"+pod+" "):
		_ = os.WriteFile(filepath.Join(state, "deleted"), nil, 0o644)
	default:
		fmt.Fprintf(os.Stderr, "fake kubectl: unexpected %q\n", line)
		return 1
	}
	return 0
}

// npdPatch is what the test reads of deploy/npd/daemonset-patch.yaml.
type npdPatch struct {
	Spec struct {
		Template struct {
			Spec struct {
				InitContainers []struct {
					Command      []string `yaml:"command"`
					Args         []string `yaml:"args"`
					VolumeMounts []struct {
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"initContainers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// The node-problem-detector recipe runs as written: the init container's
// command (deploy/npd/daemonset-patch.yaml) in the image, with its
// emptyDir, leaves the binary there (the image has no shell and no cp);
// NPD's container, where that emptyDir is mounted (another image: a root
// holding only it and the node), runs the rule of
// deploy/npd/volrecon-plugin-monitor.json, path and args as they are,
// against an API server in-cluster (its token and CA where every pod
// has them): the orphan still mounted is a problem, exit 1.
func TestNPDRecipeRunsInTheImage(t *testing.T) {
	needRoot(t)
	volrecon, _ := commands(t)
	root, env := imageRoot(t, volrecon)

	var patch npdPatch
	data, err := os.ReadFile("../deploy/npd/daemonset-patch.yaml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &patch))
	inits := patch.Spec.Template.Spec.InitContainers
	require.Len(t, inits, 1)
	require.Len(t, inits[0].VolumeMounts, 1)
	emptyDir := inits[0].VolumeMounts[0].MountPath
	require.NoError(t, os.MkdirAll(filepath.Join(root, emptyDir), 0o777)) // the kubelet's emptyDir, mounted there
	out, errOut, code, err := runIn(root, env, append(inits[0].Command, inits[0].Args...))
	require.NoError(t, err)
	require.Equal(t, 0, code, "the init container: %s%s", out, errOut)
	t.Logf("init container: %s", out)

	var config struct {
		Rules []struct {
			Path string   `json:"path"`
			Args []string `json:"args"`
		} `json:"rules"`
	}
	data, err = os.ReadFile("../deploy/npd/volrecon-plugin-monitor.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &config))
	require.Len(t, config.Rules, 1)
	rule := config.Rules[0]

	npd := t.TempDir()
	require.Equal(t, emptyDir, filepath.Dir(rule.Path), "the rule runs what the init container wrote")
	installed, err := os.ReadFile(filepath.Join(root, rule.Path))
	require.NoError(t, err)
	want, err := os.ReadFile(volrecon)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, installed), "the binary, whole")
	fi, err := os.Stat(filepath.Join(root, rule.Path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	require.NoError(t, os.MkdirAll(filepath.Join(npd, emptyDir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(npd, rule.Path), installed, 0o755))
	makeNode(t, npd)
	api := fakeAPIServer(t, npd)

	out, errOut, code, err = runIn(npd, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "NODE_NAME=" + testNode,
		"KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT=" + api.Port()}, append([]string{rule.Path}, rule.Args...))
	require.NoError(t, err)
	t.Logf("rule: exit %d: %s\nstderr: %s", code, out, errOut)
	assert.Equal(t, 1, code, "a problem")
	assert.Equal(t, "1 finding: OrphanedPodRunning; first: pods/"+orphanUID+"\n", out)
}

// fakeAPIServer serves the node's pods and no CSIDriver over TLS on
// loopback, and writes, under root, the ServiceAccount token and CA
// where client-go's in-cluster config reads them.
func fakeAPIServer(t *testing.T, root string) *url.URL {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/pods" && r.URL.Query().Get("fieldSelector") == "spec.nodeName="+testNode:
			fmt.Fprint(w, podListJSON)
		case r.URL.Path == "/apis/storage.k8s.io/v1/csidrivers":
			fmt.Fprint(w, `{"apiVersion":"storage.k8s.io/v1","kind":"CSIDriverList","metadata":{"resourceVersion":"7"},"items":[]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	sa := filepath.Join(root, "var/run/secrets/kubernetes.io/serviceaccount")
	require.NoError(t, os.MkdirAll(sa, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sa, "token"), []byte("npd-token"), 0o600))
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(filepath.Join(sa, "ca.crt"), ca, 0o644))
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	require.Regexp(t, regexp.MustCompile(`^127\.0\.0\.1$`), u.Hostname())
	return u
}
