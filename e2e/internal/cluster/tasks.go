package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// RunningTasks returns the PID of every running task (container or
// sandbox) of the Kubernetes namespace of our containerd, by container ID.
func (c *Cluster) RunningTasks(ctx context.Context) (map[string]int, error) {
	out, err := c.ctr(ctx, "tasks", "ls")
	if err != nil {
		return nil, err
	}
	tasks := map[string]int{}
	for _, line := range strings.Split(out, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 || f[2] != "RUNNING" {
			continue
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("ctr tasks ls: line %q: %w", line, err)
		}
		tasks[f[0]] = pid
	}
	return tasks, nil
}

// RunningPodUIDs returns the UIDs of the pods that have a running task
// (a container or the sandbox), from the containers' CRI labels.
func (c *Cluster) RunningPodUIDs(ctx context.Context) (map[string]bool, error) {
	tasks, err := c.RunningTasks(ctx)
	if err != nil {
		return nil, err
	}
	uids := map[string]bool{}
	for id := range tasks {
		out, err := c.ctr(ctx, "containers", "info", id)
		if err != nil {
			continue // gone since the list
		}
		var info struct{ Labels map[string]string }
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			return nil, fmt.Errorf("ctr containers info %s: %w", id, err)
		}
		if uid := info.Labels["io.kubernetes.pod.uid"]; uid != "" {
			uids[uid] = true
		}
	}
	return uids, nil
}
