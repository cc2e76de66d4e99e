#!/bin/sh
# build-envserver.sh builds the envserver image for Kubernetes
# (deploy/kubernetes/) without any registry: the sandbox image
# (images/build.sh, built first when missing) with envserver and guestd in
# /opt/shinken/bin, run as root. With the process provider the sandboxes
# see this image's filesystem read-only as their OS, so it is the sandbox
# image's desktop and apps plus the server.
#
# Tagged shinken-envserver:<content tag> (a hash of the base image ref, the
# two binaries and this script) and shinken-envserver:latest; a no-op when
# the tag exists. Load it into a node's runtime with
#   docker save shinken-envserver:latest | ctr -n k8s.io images import -
#
# Usage: BIN=<dir with static envserver and guestd> images/build-envserver.sh [--print-ref]
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${BIN:-$root/bin}
repo=shinken-envserver

base=$(sh "$here/build.sh" --print-ref)
for b in envserver guestd; do
	if [ ! -x "$bin/$b" ]; then
		echo "build-envserver.sh: $bin/$b missing (make image-envserver builds it)" >&2
		exit 1
	fi
done
tag=$({ echo "$base"; cat "$bin/envserver" "$bin/guestd" "$here/build-envserver.sh"; } | sha256sum | cut -c1-12)
ref="$repo:$tag"
if [ "${1:-}" = "--print-ref" ]; then
	echo "$ref"
	exit 0
fi
if docker image inspect "$ref" >/dev/null 2>&1; then
	docker tag "$ref" "$repo:latest"
	echo "image $ref is up to date"
	exit 0
fi
if ! docker image inspect "$base" >/dev/null 2>&1; then
	sh "$here/build.sh"
fi

stage="$root/_build/envserver-image/stage-$tag"
rm -rf "$stage"
mkdir -p "$stage/opt/shinken/bin"
cp "$bin/envserver" "$bin/guestd" "$stage/opt/shinken/bin/"
chmod 0755 "$stage/opt/shinken/bin/envserver" "$stage/opt/shinken/bin/guestd"
c=$(docker create "$base")
trap 'docker rm -f "$c" >/dev/null 2>&1 || true; rm -rf "$stage"' EXIT
tar -C "$stage" --numeric-owner --owner=0 --group=0 -c opt | docker cp - "$c:/"
docker commit \
	--change 'USER root' \
	--change 'WORKDIR /' \
	--change 'ENV HOME=/root' \
	--change "LABEL org.shinken.envserver=$tag" \
	--change 'ENTRYPOINT ["/opt/shinken/bin/envserver"]' \
	--change 'CMD []' \
	"$c" "$ref" >/dev/null
docker tag "$ref" "$repo:latest"
echo "built $ref"
