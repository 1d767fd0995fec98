package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// CheckClean reports anything of ours still on the machine: processes that
// mention the state dir or our containerd socket, mounts under the state
// dir, kubepods cgroups we created, and listening sockets on our ports.
func (c *Cluster) CheckClean() error {
	var errs []error
	if pids := processesMentioning(c.Layout.StateDir); len(pids) > 0 {
		errs = append(errs, fmt.Errorf("processes left: %v", pids))
	}
	if points, err := MountPoints(c.Layout.StateDir); err != nil || len(points) > 0 {
		errs = append(errs, fmt.Errorf("mounts left under %s: %v %v", c.Layout.StateDir, points, err))
	}
	for _, g := range kubepodsCgroups() {
		if !c.host.Existed[g] {
			errs = append(errs, fmt.Errorf("cgroup left: %s", g))
		}
	}
	if _, err := os.Stat(c.Layout.StateDir); err == nil {
		errs = append(errs, fmt.Errorf("state dir left: %s", c.Layout.StateDir))
	}
	if ports := listeningPorts(); len(ports) > 0 {
		errs = append(errs, fmt.Errorf("ports still listening: %v", ports))
	}
	return errors.Join(errs...)
}

// ourPorts are the fixed ports the cluster listens on.
var ourPorts = []int{APIServerPort, KubeletPort, KubeletReadOnlyPort, KubeletHealthzPort, etcdClientPort, etcdPeerPort, etcdMetricsPort,
	ControllerManagerPort, SchedulerPort, PrometheusPort}

// listeningPorts lists which of our ports still have a listener, from
// /proc/net/tcp (state 0A is LISTEN); a few retries let sockets close.
func listeningPorts() []int {
	var left []int
	for range 20 {
		left = left[:0]
		open := listening()
		for _, p := range ourPorts {
			if open[p] {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return left
}

func listening() map[int]bool {
	open := map[int]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "0A" {
				continue
			}
			_, portHex, ok := strings.Cut(fields[1], ":")
			if port, err := strconv.ParseUint(portHex, 16, 16); ok && err == nil {
				open[int(port)] = true
			}
		}
		file.Close()
	}
	return open
}

// PortFree reports whether nothing listens on 127.0.0.1:port.
func PortFree(port int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
