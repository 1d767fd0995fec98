package kube

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrNoNodeName: the node to ask about was not named.
var ErrNoNodeName = errors.New("no node name: pass --node-name or set $NODE_NAME (in a DaemonSet, from the downward API spec.nodeName)")

// NodeName returns flag if set, else $NODE_NAME, else ErrNoNodeName.
func NodeName(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("NODE_NAME"); env != "" {
		return env, nil
	}
	return "", ErrNoNodeName
}

// NewClient builds a client from the kubeconfig file at path, or, when path
// is empty, from the in-cluster config of a pod's service account, with
// the caps of opts on what it reads.
func NewClient(kubeconfig string, opts ClientOptions) (*Client, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		where := "the in-cluster config (no --kubeconfig given)"
		if kubeconfig != "" {
			where = "kubeconfig " + kubeconfig
		}
		return nil, fmt.Errorf("kube: %s: %w", where, err)
	}
	cfg.UserAgent = "volrecon"
	return newClientFor(cfg, opts)
}
