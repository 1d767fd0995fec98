module github.com/volrecon/volrecon

go 1.26.0

require (
	github.com/go-logr/logr v1.4.3
	github.com/moby/sys/mountinfo v0.7.2
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.48.0
	k8s.io/klog/v2 v2.140.0
	k8s.io/mount-utils v0.37.2
	k8s.io/utils v0.0.0-20261023123148-ca04ba58ecab
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
