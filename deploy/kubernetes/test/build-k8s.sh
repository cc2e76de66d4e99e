#!/bin/sh
# build-k8s.sh OUTDIR [BINARY...] builds the Kubernetes binaries the tests
# run from the versions the kbuild module pins, into OUTDIR, unless they are
# already there. By default those `make test-k8s` runs (kube-apiserver,
# kubectl, etcd); `make test-k8s-node` also names kubelet,
# kube-controller-manager and kube-scheduler. The Makefile names OUTDIR
# after the Kubernetes version and a hash of kbuild/go.mod, so a version bump
# builds afresh and every later run reuses the cache.
#
# Cold: module downloads (~600 MB) and several minutes of CPU on two cores
# (peak ~2.8 GB RSS); warm: nothing to do.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build-k8s.sh OUTDIR [BINARY...]}
shift
GO=${GO:-go}
want=${*:-kube-apiserver kubectl etcd}

missing=""
for b in $want; do
	[ -x "$out/$b" ] || missing="$missing $b"
done
if [ -z "$missing" ]; then
	exit 0
fi

cd "$here/kbuild"
kver=$($GO list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$kver" | cut -d. -f2)
echo "building$missing (Kubernetes $kver) into $out"
# Without the version stamps the server calls itself v0.0.0-master and
# kubectl refuses to talk to it.
ldf="-s -w -X k8s.io/component-base/version.gitVersion=$kver -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
mkdir -p "$out"
tmp="$out/.part"
rm -rf "$tmp"
mkdir -p "$tmp"
for b in $missing; do
	case $b in
	kube-apiserver) pkg=k8s.io/kubernetes/cmd/kube-apiserver ;;
	kubectl) pkg=k8s.io/kubernetes/cmd/kubectl ;;
	etcd) pkg=go.etcd.io/etcd/server/v3 ;;
	kubelet | kube-controller-manager | kube-scheduler) pkg=k8s.io/kubernetes/cmd/$b ;;
	*)
		echo "build-k8s.sh: unknown binary $b" >&2
		exit 2
		;;
	esac
	$GO build -trimpath -ldflags="$ldf" -o "$tmp/$b" "$pkg"
	mv "$tmp/$b" "$out/$b"
done
rmdir "$tmp"
"$out/kubectl" version --client
