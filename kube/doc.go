// Package kube makes the Kubernetes API server a source of the desired
// state for reconstruct: the pods bound to this node (reconstruct.PodSource),
// which CSI drivers need no attach, and which CSI volumes those pods use
// (their PVCs → PVs, for cleanup's CSI teardown). It also publishes
// findings as Events on the Node (Events), and keeps one Node condition of
// its own, VolumeStateHealthy, as the latest scan says (HealthCondition,
// NodeConditionWriter). Its Lister also checks a scan against the
// cluster's objects (reconstruct.ClusterChecker: CheckCluster): staging
// mounts whose volume has no VolumeAttachment to the node, a node tainted
// out-of-service with live mounts, pods waiting on an attached volume
// never staged; a check whose reads fail gives no finding and is named
// unknown in the State.
//
// Only a confirmed answer counts. A list that failed, timed out, was
// refused (403) or comes from a watch that has gone quiet is an error, and
// reconstruct then keeps every pod Unknown: nothing is ever orphaned on a
// lookup that failed. A list is every page of it within one resource
// version, or an error (IncompleteListError): part of a list is never taken
// for the whole. Every answer is bounded in bytes before it is decoded
// (ResponseTooLargeError, ClientOptions) and in time (ResponseTooSlowError).
//
// A pod is active under its UID and, for a static pod, under its config
// hash (annotation kubernetes.io/config.hash of its mirror pod), which is
// the name the kubelet gives the static pod's dir.
//
// The calls go through API, which Client implements: a narrow client of
// core/v1 and storage.k8s.io/v1 over client-go's REST client, not the
// clientset, whose scheme registers every API group at init and whose
// typed clients bring 56 k8s.io/api packages into the binary (~11 MiB of
// RSS in every volrecon process, and 34 MB of binary). Tests adapt the fake
// clientset to API with testkit/kubetest.
//
// It is not for reading the node itself (package reconstruct) and it never
// writes to the API server except Events and its Node condition, when
// asked.
package kube
