//go:build tools

// Package kbuild pins the Kubernetes binaries that `make test-k8s` runs
// (kube-apiserver, kubectl, etcd) and those `make test-k8s-node` adds for a
// real single node (kubelet, kube-controller-manager, kube-scheduler). It is a module of its
// own so that Kubernetes' dependency graph stays out of the project's go.mod;
// deploy/kubernetes/test/build-k8s.sh builds the binaries from it, once per
// version.
package kbuild

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
