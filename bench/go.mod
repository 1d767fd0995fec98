module github.com/volrecon/volrecon/bench

go 1.26.0

require (
	github.com/moby/sys/mountinfo v0.7.2
	github.com/prometheus/procfs v0.22.0
	github.com/stretchr/testify v1.12.1
	github.com/volrecon/volrecon v0.0.0
	k8s.io/mount-utils v0.37.2
)

require (
	github.com/go-logr/logr v1.4.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.49.0 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/utils v0.0.0-20261023123148-ca04ba58ecab // indirect
)

// The peers are compared with the parser in this repository.
replace github.com/volrecon/volrecon => ../
