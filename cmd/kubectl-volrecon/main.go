package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/volrecon/volrecon/podlist"
	"github.com/volrecon/volrecon/podsdir"
)

// DefaultImage is the image of volrecon that the fleet's DaemonSet runs
// (deploy/daemonset.yaml); it must have volrecon on its PATH.
const DefaultImage = "ghcr.io/volrecon/volrecon:v0.1.0"

// The paths of kubectl debug's node pod: the node's / is mounted at /host,
// and with the host's PID namespace PID 1 is the host's init, whose mount
// table is the host's.
const (
	hostRoot  = "/host"
	mountInfo = "/proc/1/mountinfo"
)

const usage = `kubectl volrecon: volrecon's scan of a node's volume state, through kubectl debug.

Usage:
  kubectl volrecon node NAME [flags] [scan flags] [-- scan flags]

It lists the node's pods with your kubectl ("kubectl get pods --all-namespaces
--field-selector=spec.nodeName=NAME --output=json"), then runs
"volrecon scan --host-root=/host --mountinfo=/proc/1/mountinfo
--active-pods=keys:UID,... [scan flags]" in a pod that "kubectl debug node/NAME
--profile=sysadmin --image=IMAGE" starts on the node (privileged, in the host's
namespaces, the node's / at /host), prints its output, exits with its exit
code, and deletes the pod. The pods' keys tell the scan which pod dirs are
orphaned; without them no orphan is found. It never cleans anything. The
namespace must admit privileged pods.

Flags:
  --image IMAGE        the image with volrecon on its PATH (default ` + DefaultImage + `)
  --timeout DURATION   how long to wait for the scan, image pull included (default 5m)
  --keep               keep the debug pod (kubectl debug's default)
  -n, --namespace NS   the namespace of the debug pod (kubectl's flag)
  --context CTX, --kubeconfig FILE   passed to kubectl

Scan flags are volrecon scan's: -o wide, -o json, --problems, --pod, --root-dir,
--probe and the others (volrecon scan --help); not --host-root, --mountinfo
or --demo, which this plugin sets or which make no sense on a node. An
--active-pods of your own is passed as it is, and the pods are not listed:
--active-pods= (empty) scans without them (every pod Unknown).

kubectl is $KUBECTL, else kubectl on PATH.
`

// Exit codes of the plugin itself; otherwise it exits with the scan's.
const (
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the parsed command line.
type options struct {
	node, image string
	timeout     time.Duration
	keep        bool
	kubectlArgs []string // global kubectl flags, for every call
	scanArgs    []string
}

// nodeName is a Node's name as the API server admits it (a DNS subdomain).
var nodeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// refusedScanFlags are set by the plugin, or make no sense on a node.
var refusedScanFlags = []string{"host-root", "mountinfo", "demo"}

func parseArgs(args []string) (options, error) {
	o := options{image: DefaultImage, timeout: 5 * time.Minute}
	if len(args) == 0 || args[0] != "node" {
		return o, errors.New("say which node: kubectl volrecon node NAME")
	}
	if len(args) < 2 || !nodeName.MatchString(args[1]) {
		name := ""
		if len(args) >= 2 {
			name = strconv.Quote(args[1])
		}
		return o, fmt.Errorf("kubectl volrecon node NAME: %s is not a node name", cmpOr(name, "no name"))
	}
	o.node = args[1]
	rest := args[2:]
	for i := 0; i < len(rest); i++ {
		arg := rest[i]
		if arg == "--" {
			o.scanArgs = append(o.scanArgs, rest[i+1:]...)
			break
		}
		name, value, hasValue := splitFlag(arg)
		takeValue := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(rest) {
				return "", fmt.Errorf("flag %s needs a value", arg)
			}
			i++
			return rest[i], nil
		}
		var err error
		switch name {
		case "image":
			o.image, err = takeValue()
			if err == nil && (o.image == "" || strings.HasPrefix(o.image, "-") || strings.ContainsAny(o.image, " \t\n")) {
				err = fmt.Errorf("--image %q is not an image reference", o.image)
			}
		case "timeout":
			var v string
			if v, err = takeValue(); err == nil {
				o.timeout, err = time.ParseDuration(v)
				if err == nil && o.timeout <= 0 {
					err = fmt.Errorf("--timeout must be positive, not %s", v)
				}
			}
		case "keep":
			o.keep = !hasValue || value == "true"
		case "n", "namespace", "context", "kubeconfig":
			var v string
			if v, err = takeValue(); err == nil {
				o.kubectlArgs = append(o.kubectlArgs, "--"+longName(name)+"="+v)
			}
		default:
			if slices.Contains(refusedScanFlags, name) {
				return o, fmt.Errorf("--%s: the plugin runs the scan with --host-root=%s --mountinfo=%s, on the node itself", name, hostRoot, mountInfo)
			}
			o.scanArgs = append(o.scanArgs, arg)
		}
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

// splitFlag splits -name, --name and --name=value; name is "" for an
// argument that is not a flag.
func splitFlag(arg string) (name, value string, hasValue bool) {
	if !strings.HasPrefix(arg, "-") || arg == "-" {
		return "", "", false
	}
	name = strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
	name, value, hasValue = strings.Cut(name, "=")
	return name, value, hasValue
}

func longName(name string) string {
	if name == "n" {
		return "namespace"
	}
	return name
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// debugArgs is the kubectl debug command line that starts the scan (the
// global flags come first), with the node's pod keys when they were listed
// (nil: the scan's own --active-pods, if any).
func (o options) debugArgs(podKeys []string) []string {
	args := append([]string{}, "debug", "node/"+o.node, "--profile=sysadmin", "--image="+o.image,
		"--", "volrecon", "scan", "--host-root="+hostRoot, "--mountinfo="+mountInfo)
	if podKeys != nil {
		args = append(args, "--active-pods=keys:"+strings.Join(podKeys, ","))
	}
	return append(args, o.scanArgs...)
}

// ownActivePods: the scan flags give --active-pods themselves.
func (o options) ownActivePods() bool {
	return slices.ContainsFunc(o.scanArgs, func(arg string) bool {
		name, _, _ := splitFlag(arg)
		return name == "active-pods"
	})
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, usage)
		return 0
	}
	o, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "kubectl volrecon: %v\n\n%s", err, usage)
		return exitUsage
	}
	k, err := findKubectl()
	if err != nil {
		fmt.Fprintf(stderr, "kubectl volrecon: %v\n", err)
		return exitFailed
	}
	code, err := k.scanNode(ctx, o, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "kubectl volrecon: %v\n", err)
		return exitFailed
	}
	return code
}

// kubectl runs the kubectl binary at path.
type kubectl struct {
	path   string
	global []string
}

func findKubectl() (kubectl, error) {
	if env := os.Getenv("KUBECTL"); env != "" {
		path, err := exec.LookPath(env)
		if err != nil {
			return kubectl{}, fmt.Errorf("$KUBECTL=%s: %w", env, err)
		}
		return kubectl{path: path}, nil
	}
	path, err := exec.LookPath("kubectl")
	if err != nil {
		return kubectl{}, fmt.Errorf("kubectl is not on PATH (set $KUBECTL to its path): %w", err)
	}
	return kubectl{path: path}, nil
}

// output runs kubectl with args and returns its stdout; its stderr goes to
// stderr.
func (k kubectl) output(ctx context.Context, stderr io.Writer, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, k.path, append(slices.Clone(k.global), args...)...)
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// createdPod is kubectl debug's line naming the pod it created.
var createdPod = regexp.MustCompile(`(?m)^Creating debugging pod (\S+) with container (\S+) on node `)

// scanNode starts the scan, prints its output as it comes (kubectl logs
// -f: an attach would lose what the scan wrote before it connected, and
// a quick scan ends before), and returns the scan's exit code.
func (k kubectl) scanNode(ctx context.Context, o options, stdout, stderr io.Writer) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	k.global = o.kubectlArgs
	var keys []string
	if !o.ownActivePods() {
		var err error
		if keys, err = k.nodePodKeys(ctx, stderr, o.node); err != nil {
			return 0, err
		}
	}
	debugOut, err := k.output(ctx, stderr, o.debugArgs(keys)...)
	m := createdPod.FindStringSubmatch(debugOut)
	if m == nil {
		if err == nil {
			err = fmt.Errorf("kubectl debug named no pod: %q", debugOut)
		}
		return 0, err
	}
	pod, container := m[1], m[2]
	fmt.Fprintf(stderr, "kubectl volrecon: scanning node %s in pod %s\n", o.node, pod)
	if !o.keep {
		defer k.deletePod(stderr, pod)
	}
	if err != nil {
		return 0, err
	}
	if err := k.waitStarted(ctx, stderr, pod); err != nil {
		return 0, err
	}
	logs := exec.CommandContext(ctx, k.path, append(slices.Clone(k.global), "logs", "--follow", "pod/"+pod, "--container="+container)...)
	logs.Stdout, logs.Stderr = stdout, stderr
	if err := logs.Run(); err != nil {
		return 0, fmt.Errorf("kubectl logs of pod %s: %w", pod, err)
	}
	return k.exitCode(ctx, stderr, pod)
}

// nodePodKeys lists the pods bound to node with the user's kubectl, and
// returns their keys (UIDs, and static pods' config hashes: package
// podlist reads kubectl's JSON, bounded in bytes and time, and refuses a
// pod of another node). The debug pod's own ServiceAccount may not list
// pods; the user's kubectl may. A list that fails stops the plugin: a scan
// without it would find no orphan.
func (k kubectl) nodePodKeys(ctx context.Context, stderr io.Writer, node string) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	args := append(slices.Clone(k.global), "get", "pods", "--all-namespaces", "--field-selector=spec.nodeName="+node, "--output=json")
	cmd := exec.CommandContext(ctx, k.path, args...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kubectl get pods: %w", err)
	}
	list, readErr := podlist.ReadList(ctx, "kubectl get pods", out, podlist.Limits{Node: node})
	if readErr != nil {
		cancel() // a kubectl whose output was refused is killed
	}
	if waitErr := cmd.Wait(); readErr == nil && waitErr != nil {
		readErr = waitErr
	}
	if readErr != nil {
		return nil, fmt.Errorf("list the pods of node %s (kubectl get pods --all-namespaces --field-selector=spec.nodeName=%s): %w; "+
			"pass --active-pods= to scan without them (every pod Unknown, no orphan found)", node, node, readErr)
	}
	// A config hash annotation is anyone's to set on their pod: one that no
	// pod dir can be named by is dropped, not passed to be refused.
	keys := []string{}
	for _, k := range list.Keys {
		if podsdir.IsPodUID(k) {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// waitStarted waits until the pod is no longer Pending (its image pulled).
func (k kubectl) waitStarted(ctx context.Context, stderr io.Writer, pod string) error {
	for {
		phase, err := k.output(ctx, stderr, "get", "pod/"+pod, "--output=jsonpath={.status.phase}")
		if err != nil {
			return err
		}
		if phase != "" && phase != "Pending" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s still %s: %w", pod, cmpOr(phase, "unscheduled"), ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// exitCode waits for the container's exit code.
func (k kubectl) exitCode(ctx context.Context, stderr io.Writer, pod string) (int, error) {
	for {
		out, err := k.output(ctx, stderr, "get", "pod/"+pod, "--output=jsonpath={.status.containerStatuses[0].state.terminated.exitCode}")
		if err != nil {
			return 0, err
		}
		if out = strings.TrimSpace(out); out != "" {
			code, err := strconv.Atoi(out)
			if err != nil {
				return 0, fmt.Errorf("pod %s: exit code %q", pod, out)
			}
			return code, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("pod %s: the scan did not end: %w", pod, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// deletePod deletes the debug pod, also after a timeout or Ctrl-C.
func (k kubectl) deletePod(stderr io.Writer, pod string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := k.output(ctx, stderr, "delete", "pod/"+pod, "--wait=false", "--ignore-not-found"); err != nil {
		fmt.Fprintf(stderr, "kubectl volrecon: the debug pod %s is left: %v\n", pod, err)
	}
}
