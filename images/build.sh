#!/bin/sh
# build.sh builds the Shinken sandbox image without any registry: a Debian
# rootfs made by debootstrap from this machine's own apt mirror, imported with
# `docker import` and tagged shinken-sandbox:<content tag>, where the content
# tag is a hash of this script and packages.txt (images.Tag in Go computes the
# same value). If that tag already exists the build is a no-op.
#
# guestd is not baked in: the docker provider bind-mounts the host's static
# guestd read-only at /opt/shinken/guestd, so guestd changes need no rebuild.
#
# Usage: images/build.sh [--print-ref]   (run as root: debootstrap needs it)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
repo=shinken-sandbox
tag=$(cat "$here/build.sh" "$here/packages.txt" | sha256sum | cut -c1-12)
ref="$repo:$tag"

if [ "${1:-}" = "--print-ref" ]; then
	echo "$ref"
	exit 0
fi

if docker image inspect "$ref" >/dev/null 2>&1; then
	echo "image $ref is up to date"
	exit 0
fi

# mirror and suite: the first Debian main archive in this machine's apt
# sources (deb822 .sources files first, then one-line sources.list).
mirror=""
suite=""
for f in /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] || continue
	set -- $(awk '
		/^[[:space:]]*$/ { if (u != "" && s != "" && u ~ /\/debian\/?$/) { print u, s; exit } u=""; s=""; next }
		/^URIs:/   { u=$2 }
		/^Suites:/ { s=$2 }
		END { if (u != "" && s != "" && u ~ /\/debian\/?$/) print u, s }' "$f" | head -n1)
	if [ $# -eq 2 ]; then mirror=$1; suite=$2; break; fi
done
if [ -z "$mirror" ]; then
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		set -- $(awk '$1 == "deb" && $2 !~ /^\[/ && $2 ~ /\/debian\/?$/ { print $2, $3; exit }' "$f")
		if [ $# -eq 2 ]; then mirror=$1; suite=$2; break; fi
	done
fi
if [ -z "$mirror" ]; then
	echo "build.sh: no Debian mirror found in /etc/apt/sources.list{,.d}" >&2
	exit 1
fi
echo "building $ref from $mirror $suite"

pkgs=$(grep -v '^[[:space:]]*#' "$here/packages.txt" | tr -s ' \n' ' ')
work="$root/_build/image"
rootfs="$work/rootfs-$tag"
# A failed run leaves its rootfs for inspection; start clean.
if [ -d "$rootfs/proc" ] && mountpoint -q "$rootfs/proc"; then umount "$rootfs/proc"; fi
rm -rf "$rootfs"
mkdir -p "$work"

# minbase first (cached as a tarball per suite: it does not depend on the
# recipe), then the desktop packages with apt inside the chroot (apt orders
# the configuration of a large dependency tree; debootstrap's --include does
# not reliably).
base="$work/minbase-$suite.tgz"
if [ ! -f "$base" ]; then
	debootstrap --variant=minbase --make-tarball="$base.part" "$suite" "$work/tarball-tmp" "$mirror"
	rm -rf "$work/tarball-tmp"
	mv "$base.part" "$base"
fi
debootstrap --variant=minbase --unpack-tarball="$base" "$suite" "$rootfs" "$mirror"
echo "deb $mirror $suite main" >"$rootfs/etc/apt/sources.list"
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
chmod +x "$rootfs/usr/sbin/policy-rc.d"
mount -t proc proc "$rootfs/proc"
trap 'umount "$rootfs/proc" 2>/dev/null || true' EXIT
chroot "$rootfs" apt-get update
DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get install -y --no-install-recommends $pkgs
umount "$rootfs/proc"
trap - EXIT
rm -f "$rootfs/usr/sbin/policy-rc.d"

# The desktop runs as an unprivileged user; /run/shinken is where the host
# bind-mounts the guest socket dir, /opt/shinken where it mounts guestd.
chroot "$rootfs" /usr/sbin/useradd --uid 1000 --create-home --shell /bin/bash agent
# OSWorld's tasks name the home /home/user: a link to the same home.
ln -s agent "$rootfs/home/user"
mkdir -p "$rootfs/run/shinken" "$rootfs/opt/shinken"
mkdir -p -m 1777 "$rootfs/tmp/.X11-unix"
chmod 1777 "$rootfs/tmp/.X11-unix"
# Home and /tmp are the agent's; nothing else is writable to it.
chmod 0755 "$rootfs/var/tmp"
# libX11's Compose cache (images/compose-cache.sh, run by make deps), when
# the host's was parsed from the same Compose file as the image's: X clients
# then map the parsed table instead of parsing it at every start.
xc=usr/share/X11/locale/en_US.UTF-8/Compose
if [ -d /var/cache/libx11/compose ] && cmp -s "/$xc" "$rootfs/$xc"; then
	install -d -m 0755 "$rootfs/var/cache/libx11/compose"
	cp -p /var/cache/libx11/compose/* "$rootfs/var/cache/libx11/compose/"
	chown -R 0:0 "$rootfs/var/cache/libx11/compose"
fi

# Keep it small, in files above all: docker commit on a fuse-overlayfs
# engine walks the whole tree, so its time grows with the file count. Nothing
# at run time needs apt/dpkg metadata, docs, manuals, translations, time zones
# or icon sets (GTK falls back to its built-in icons).
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
	"$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
	"$rootfs"/usr/share/groff "$rootfs"/usr/share/lintian "$rootfs"/usr/share/bash-completion \
	"$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old \
	"$rootfs"/var/lib/dpkg/info/*.md5sums "$rootfs"/var/lib/dpkg/info/*.list
find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
find "$rootfs/usr/share/zoneinfo" -mindepth 1 -maxdepth 1 ! -name UTC ! -name Etc -exec rm -rf {} +
find "$rootfs/usr/share/icons" -mindepth 2 ! -name index.theme ! -type d -delete
find "$rootfs/usr/share/icons" -mindepth 1 -type d -empty -delete
find "$rootfs/usr/lib" -name __pycache__ -type d -prune -exec rm -rf {} +
ln -sf /usr/share/zoneinfo/UTC "$rootfs/etc/localtime"
echo "files in rootfs: $(find "$rootfs" -xdev | wc -l)"

tar -C "$rootfs" --numeric-owner -c . | docker import \
	--change 'USER agent' \
	--change 'WORKDIR /home/agent' \
	--change 'ENV HOME=/home/agent' \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change "LABEL org.shinken.image=$tag" \
	--change 'CMD ["/opt/shinken/guestd", "--session"]' \
	- "$ref"
docker tag "$ref" "$repo:latest"
rm -rf "$rootfs"
echo "built $ref"
