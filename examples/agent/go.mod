// An example of a kubelet-like agent that rebuilds its state with volrecon,
// and its unit tests on a fake node, using only volrecon's public API: a
// module of its own, as an importer's is (its path is outside volrecon's,
// so volrecon's internal packages are out of its reach).
module example.com/agent

go 1.26.0

require (
	github.com/stretchr/testify v1.12.1
	github.com/volrecon/volrecon v0.0.0-00010101000000-000000000000
	k8s.io/mount-utils v0.37.2
)

require (
	github.com/container-storage-interface/spec v1.13.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/moby/sys/mountinfo v0.7.2 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261012220534-4341edf3f941 // indirect
	google.golang.org/grpc v1.84.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/utils v0.0.0-20261023123148-ca04ba58ecab // indirect
)

// The volrecon of this repository.
replace github.com/volrecon/volrecon => ../..
