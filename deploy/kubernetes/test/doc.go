// Package k8stest runs the Kubernetes manifests (deploy/kubernetes) and the
// Python client's k8s:// discovery against a real kube-apiserver and etcd
// started on loopback (`make test-k8s`; docs/kubernetes.md, "Tests"). It
// needs only the standard library: the cluster is driven with kubectl. The
// binaries come from the kbuild module next to it, built once per version
// (build-k8s.sh); SHINKEN_K8S_BIN names their directory, and without it
// every test skips.
package k8stest
