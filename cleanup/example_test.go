package cleanup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// Plan the cleanup of a pod that is no longer in the active pod list, and
// apply it. Without Apply, Execute is a dry run. The scan asks for evidence
// that the pod still runs (liveness.New on a node; here, where the pod is a
// dir of a temp dir, the test kit's fakenode.Life, which finds none):
// without a LifeChecker every orphan is kept.
func ExamplePlan() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	pod := "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	_ = os.MkdirAll(filepath.Join(hostRoot, pod, "volumes/kubernetes.io~empty-dir/cache"), 0o750)
	_ = os.WriteFile(filepath.Join(hostRoot, pod, "etc-hosts"), []byte("127.0.0.1 localhost\n"), 0o600)
	node := reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) {
		return mountscan.FromLines("1 0 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw")
	}}}

	st, err := reconstruct.Scan(context.Background(), reconstruct.Options{Node: reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: node.MountTable.Read}},
		ActivePods: reconstruct.PodList{"7f8e9d0c-1b2a-4c3d-8e5f-6a7b8c9d0e1f"}, LifeChecker: fakenode.Life{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	plan := cleanup.Plan(context.Background(), st, cleanup.Options{Node: node})
	results := cleanup.Execute(context.Background(), plan, cleanup.ExecOptions{Node: node, Apply: true})
	for _, r := range results {
		rel, _ := filepath.Rel(pod, r.Path)
		fmt.Println(r.Action.Action, rel, r.Result)
	}
	// Output:
	// Unlink etc-hosts Done
	// Rmdir volumes/kubernetes.io~empty-dir/cache Done
	// Rmdir volumes/kubernetes.io~empty-dir Done
	// Rmdir volumes Done
	// Rmdir . Done
}

// Plan from a State that went through JSON, e.g. one fetched from
// `volrecon serve`'s /report: Plan lists the orphaned pod dirs itself.
func ExamplePlan_fromJSON() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	pod := "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	_ = os.MkdirAll(filepath.Join(hostRoot, pod, "containers/app"), 0o750)
	node := reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) {
		return mountscan.FromLines("1 0 259:1 / / rw - ext4 /dev/nvme0n1p1 rw")
	}}}
	report := fmt.Sprintf(`{"schemaVersion": "volrecon.v1", "rootDir": "/var/lib/kubelet",
		"podsDir": "/var/lib/kubelet/pods", "mountTable": {"path": "/proc/self/mountinfo", "entries": 1, "consistent": true},
		"pods": [{"uid": "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", "path": %q, "status": "Orphaned", "volumeCount": 0}]}`, pod)
	var st reconstruct.State
	if err := json.Unmarshal([]byte(report), &st); err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range cleanup.Plan(context.Background(), &st, cleanup.Options{Node: node}).Actions {
		rel, _ := filepath.Rel(pod, a.Path)
		fmt.Println(a.Action, rel)
	}
	// Output:
	// Rmdir containers/app
	// Rmdir containers
	// Rmdir .
}

// A dry run makes every check the run would make, changes nothing, and
// says what the run would give: here a file written since the plan into
// a dir the plan removes.
func ExampleDryRun() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	pod := "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	_ = os.MkdirAll(filepath.Join(hostRoot, pod, "containers/app"), 0o750)
	node := reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) {
		return mountscan.FromLines("1 0 259:1 / / rw - ext4 /dev/nvme0n1p1 rw")
	}}}
	st, _ := reconstruct.Scan(context.Background(), reconstruct.Options{Node: node, ActivePods: reconstruct.PodList{"7f8e9d0c-1b2a-4c3d-8e5f-6a7b8c9d0e1f"},
		LifeChecker: fakenode.Life{}})
	plan := cleanup.Plan(context.Background(), st, cleanup.Options{Node: node})
	_ = os.WriteFile(filepath.Join(hostRoot, pod, "containers/app/new.log"), []byte("written since"), 0o600)

	for _, r := range cleanup.Execute(context.Background(), plan, cleanup.ExecOptions{Node: node}) {
		rel, _ := filepath.Rel(pod, r.Path)
		fmt.Println(r.Action.Action, rel, "- the run would give:", r.DryRun.Result, errors.Is(r.Err, unix.ENOTEMPTY))
	}
	// Output:
	// Rmdir containers/app - the run would give: Failed true
	// Rmdir containers - the run would give: Skipped false
	// Rmdir . - the run would give: Skipped false
}

// Carry out a plan that a person reviewed, after the node changed: only
// what the reviewed plan and a fresh plan both have runs; the rest is
// kept, saying why.
func ExampleReviewed() {
	pods := "/var/lib/kubelet/pods"
	pod := pods + "/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	id := &cleanup.DirIdentity{Dev: "259:1", Ino: 2, MountID: 30}
	boot := "6f1c2e0a-8d7b-4c3e-9a51-2b4d6e8f0a13"
	// Each action names the inode it judged: the same path holding
	// another file is another action.
	action := func(kind cleanup.ActionKind, path, reason string, ino uint64) cleanup.Action {
		inode := &cleanup.InodeIdentity{Dev: "259:1", Ino: ino, Type: cleanup.InodeFile, Nlink: 1}
		if kind == cleanup.Rmdir {
			inode.Type = cleanup.InodeDir
		}
		return cleanup.Action{Action: kind, Path: path, PodUID: "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", Reason: reason, Inode: inode}
	}
	reviewed := &cleanup.ActionPlan{PodsDir: pods, PodsDirIdentity: id, BootID: boot, Actions: []cleanup.Action{
		action(cleanup.Unlink, pod+"/etc-hosts", "hosts file", 11), action(cleanup.Rmdir, pod, "the pod dir", 10)}}
	fresh := &cleanup.ActionPlan{PodsDir: pods, PodsDirIdentity: id, BootID: boot, Actions: []cleanup.Action{ // a file appeared since
		action(cleanup.Unlink, pod+"/etc-hosts", "hosts file", 11), action(cleanup.Unlink, pod+"/termination-log", "a stub", 12),
		action(cleanup.Rmdir, pod, "the pod dir", 10)}}
	for _, a := range cleanup.Reviewed(reviewed, fresh).Actions {
		fmt.Println(a.Action, filepath.Base(a.Path)+":", a.Reason)
	}
	// Output:
	// Unlink etc-hosts: hosts file
	// Keep termination-log: not in the reviewed plan: not applied (planned now: Unlink: a stub)
	// Keep 0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91: not applied: /var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91/termination-log, below it, is not applied (planned now: Rmdir: the pod dir)
}

// Run is plan, scope and execute in one call, as volrecon cleanup makes
// them: here a dry run for one orphan only, which changes nothing.
func ExampleRun() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	orphan, other := "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", "1c7b4d8f-2e3a-4d2b-8f8c-4e6a7b8c9d02"
	for _, uid := range []string{orphan, other} {
		_ = os.MkdirAll(filepath.Join(hostRoot, "/var/lib/kubelet/pods", uid, "containers"), 0o750)
	}
	node := reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) {
		return mountscan.FromLines("1 0 259:1 / / rw - ext4 /dev/nvme0n1p1 rw")
	}}}
	st, err := reconstruct.Scan(context.Background(), reconstruct.Options{Node: node,
		ActivePods: reconstruct.PodList{"7f8e9d0c-1b2a-4c3d-8e5f-6a7b8c9d0e1f"}, LifeChecker: fakenode.Life{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	r := cleanup.Run(context.Background(), st, cleanup.RunOptions{Plan: cleanup.Options{Node: node},
		Pods: []string{orphan}, Exec: &cleanup.ExecOptions{Node: node}})
	for _, res := range r.Results {
		rel, _ := filepath.Rel(filepath.Join("/var/lib/kubelet/pods", orphan), res.Path)
		fmt.Println(res.Action.Action, rel, res.Result, res.DryRun.Result)
	}
	fmt.Println("failed:", r.Count(cleanup.Failed))
	// Output:
	// Rmdir containers Skipped Done
	// Rmdir . Skipped Done
	// failed: 0
}
