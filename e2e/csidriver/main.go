// Command csidriver is the e2e suite's node-only CSI driver, with the
// kubelet's plugin-registration service built in (no node-driver-registrar).
//
// Filesystem volumes are directories it owns under --data-dir: NodeStage
// bind-mounts <data>/<volume id> onto the staging path, NodePublish
// bind-mounts the staging path (or, for inline ephemeral volumes, which are
// never staged, the data dir itself) onto the target. Raw block volumes are
// loop devices over <data>/<volume id>.img, attached by NodeStage and
// bind-mounted onto the target file by NodePublish.
//
// Every call is appended to --call-log as one JSON object per line, so the
// tests can assert which calls the kubelet made.
package main

import (
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func main() {
	driverName := flag.String("driver-name", "e2e.csi.volrecon.io", "CSI driver name")
	nodeID := flag.String("node-id", "", "node ID returned by NodeGetInfo")
	kubeletRoot := flag.String("kubelet-root", "/var/lib/kubelet", "the kubelet's --root-dir")
	dataDir := flag.String("data-dir", "", "where volumes' data lives")
	callLog := flag.String("call-log", "", "JSON-lines log of every CSI call")
	holdDir := flag.String("hold-dir", "", "where a test holds calls in flight (see holds)")
	flag.Parse()
	if *nodeID == "" || *dataDir == "" || *callLog == "" {
		log.Fatal("--node-id, --data-dir and --call-log are required")
	}
	calls, err := openCallLog(*callLog)
	if err != nil {
		log.Fatal(err)
	}
	calls.hold = &holds{dir: *holdDir}
	csiSocket := filepath.Join(*kubeletRoot, "plugins", *driverName, "csi.sock")
	regSocket := filepath.Join(*kubeletRoot, "plugins_registry", *driverName+"-reg.sock")

	csiServer := grpc.NewServer(grpc.UnaryInterceptor(calls.intercept))
	csi.RegisterIdentityServer(csiServer, &identity{name: *driverName})
	csi.RegisterNodeServer(csiServer, &node{nodeID: *nodeID, dataDir: *dataDir})
	regServer := grpc.NewServer()
	registerapi.RegisterRegistrationServer(regServer, &registration{name: *driverName, endpoint: csiSocket})

	for sock, srv := range map[string]*grpc.Server{csiSocket: csiServer, regSocket: regServer} {
		ln, err := listenUnix(sock)
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			if err := srv.Serve(ln); err != nil {
				log.Fatalf("serve %s: %v", sock, err)
			}
		}()
	}
	log.Printf("csidriver %s serving %s, registering via %s", *driverName, csiSocket, regSocket)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
	// Removing the registration socket is how a plugin deregisters; the
	// volumes' mounts stay, as with any real driver.
	regServer.Stop()
	csiServer.Stop()
	os.Remove(regSocket)
	os.Remove(csiSocket)
}

func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	_ = os.Remove(path)
	return net.Listen("unix", path)
}
