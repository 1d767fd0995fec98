//go:build unix

package podsdir_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/volrecon/volrecon/podsdir"
)

// writeTree creates dirs (names ending in "/") and files under root.
func writeTree(root string, files map[string]string) {
	for name, content := range files {
		p := filepath.Join(root, name)
		if name[len(name)-1] == '/' {
			must(os.MkdirAll(p, 0o755))
			continue
		}
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		must(os.WriteFile(p, []byte(content), 0o644))
	}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func ExampleScan() {
	hostRoot, err := os.MkdirTemp("", "podsdir-example")
	must(err)
	defer os.RemoveAll(hostRoot)

	pod := "/var/lib/kubelet/pods/1d4bfc07-5c1c-4c4b-9d0b-6a3e0c2f0e01"
	staging := "/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/" + podsdir.StagingHash("vol-0abc")
	writeTree(hostRoot, map[string]string{
		pod + "/volumes/kubernetes.io~csi/pvc-1234/mount/":        "",
		pod + "/volumes/kubernetes.io~csi/pvc-1234/vol_data.json": `{"driverName":"ebs.csi.aws.com","specVolID":"pvc-1234","volumeHandle":"vol-0abc"}`,
		pod + "/volumes/kubernetes.io~projected/kube-api-access/": "",
		pod + "/volumes/kubernetes.io~empty-dir/stray-file":       "",
		pod + "/etc-hosts":           "127.0.0.1 localhost\n",
		staging + "/globalmount/":    "",
		staging + "/vol_data.json":   `{"driverName":"ebs.csi.aws.com","volumeHandle":"vol-0abc"}`,
		"/var/lib/kubelet/pods/tmp/": "",
	})

	inv, err := podsdir.Scan(context.Background(), podsdir.Options{HostRoot: hostRoot})
	must(err)
	for _, p := range inv.Pods {
		fmt.Println("pod", p.UID)
		for _, v := range p.Volumes {
			fmt.Printf("  %s %s %s", v.Mode, v.Plugin, v.Name)
			if v.VolData != nil {
				fmt.Printf(" mount=%v vol_data=%s handle=%s", v.MountDir != nil, v.VolData.State, v.VolData.VolumeHandle)
			}
			fmt.Println()
		}
		for _, o := range p.Other {
			fmt.Println("  other", o.Name, o.Type)
		}
	}
	for _, s := range inv.Staging {
		fmt.Println("staging", s.Layout, s.Driver, s.Name == podsdir.StagingHash(s.VolData.VolumeHandle), s.Exists)
	}
	for _, p := range inv.Problems {
		fmt.Println("problem", p.Kind, filepath.Base(p.Path))
	}
	// Output:
	// pod 1d4bfc07-5c1c-4c4b-9d0b-6a3e0c2f0e01
	//   Filesystem kubernetes.io/csi pvc-1234 mount=true vol_data=OK handle=vol-0abc
	//   Filesystem kubernetes.io/projected kube-api-access
	//   other etc-hosts file
	// pod tmp
	// staging current ebs.csi.aws.com true true
	// problem NotDirectory stray-file
	// problem InvalidPodUID tmp
}

func ExampleStagingHash() {
	// The current-layout staging dir of volume handle "vol-0abc" is
	// plugins/kubernetes.io/csi/<driver>/<this hash>/globalmount.
	fmt.Println(podsdir.StagingHash("vol-0abc"))
	// Output:
	// 11da287504886785318934971b34e85e3f26952afa0a2741b3bd2e9e771cc7b2
}

func ExampleOptions_ReadVolData() {
	hostRoot, err := os.MkdirTemp("", "podsdir-example")
	must(err)
	defer os.RemoveAll(hostRoot)
	writeTree(hostRoot, map[string]string{
		"/ok.json":        `{"driverName":"d","volumeHandle":"h","unknownKey":"ignored"}`,
		"/empty.json":     "",
		"/truncated.json": `{"driverName":"d","volu`,
		"/no-driver.json": `{"volumeHandle":"h"}`,
	})
	o := podsdir.Options{HostRoot: hostRoot}
	for _, name := range []string{"/ok.json", "/empty.json", "/truncated.json", "/no-driver.json", "/absent.json"} {
		vd := o.ReadVolData(name)
		fmt.Printf("%s: %s %q %s/%s\n", name, vd.State, vd.Reason, vd.DriverName, vd.VolumeHandle)
	}
	// Output:
	// /ok.json: OK "" d/h
	// /empty.json: Corrupt "empty file" /
	// /truncated.json: Corrupt "truncated JSON: unexpected EOF" /
	// /no-driver.json: Corrupt "missing driverName" /h
	// /absent.json: Missing "" /
}

// DriverRegistered answers whether a leftover vol_data.json may still be a
// restarted kubelet's way to tear its volume down through the driver.
func ExampleDriverRegistered() {
	hostRoot, err := os.MkdirTemp("", "podsdir-example")
	must(err)
	defer os.RemoveAll(hostRoot)
	writeTree(hostRoot, map[string]string{
		"/var/lib/kubelet/plugins_registry/ebs.csi.aws.com-reg.sock": "",
		"/var/lib/kubelet/plugins/":                                  "",
	})
	opts := podsdir.Options{HostRoot: hostRoot}
	for _, driver := range []string{"ebs.csi.aws.com", "gone.csi.example.com"} {
		fmt.Println(driver, podsdir.DriverRegistered(context.Background(), opts, driver))
	}
	// Output:
	// ebs.csi.aws.com true
	// gone.csi.example.com false
}
