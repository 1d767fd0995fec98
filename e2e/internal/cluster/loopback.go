package cluster

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ListeningAddresses lists every TCP socket our daemons (and their
// children, such as containerd's shims) listen on, as "name addr:port".
// The suite asserts that all of them are on 127.0.0.1.
func (c *Cluster) ListeningAddresses() ([]string, error) {
	owner := map[string]string{} // socket inode -> daemon name
	for name, d := range c.daemons {
		if d.exited() {
			continue
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.cmd.Process.Pid))
		if err != nil {
			return nil, fmt.Errorf("read fds of %s: %w", name, err)
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", d.cmd.Process.Pid), fd.Name()))
			if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
				owner[strings.TrimSuffix(inode, "]")] = name
			}
		}
	}
	var out []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			if name, ok := owner[fields[9]]; ok {
				out = append(out, name+" "+hexAddr(fields[1]))
			}
		}
		f.Close()
	}
	sort.Strings(out)
	return out, nil
}

// hexAddr turns /proc/net/tcp's "0100007F:1A0B" into "127.0.0.1:6667"
// (IPv4; IPv6 addresses are returned as hex with the port decoded).
func hexAddr(s string) string {
	ipHex, portHex, _ := strings.Cut(s, ":")
	port, _ := strconv.ParseUint(portHex, 16, 16)
	if len(ipHex) != 8 {
		return fmt.Sprintf("[%s]:%d", ipHex, port)
	}
	n, _ := strconv.ParseUint(ipHex, 16, 32)
	return fmt.Sprintf("%d.%d.%d.%d:%d", n&0xff, n>>8&0xff, n>>16&0xff, n>>24, port)
}
