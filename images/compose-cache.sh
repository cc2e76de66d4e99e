#!/bin/sh
# compose-cache.sh writes libX11's global Compose cache, the parsed Compose
# table of the sandboxes' locale (C.UTF-8, which reads en_US.UTF-8/Compose:
# half a megabyte of text). Without it every X client that opens an input
# method (openbox, xterm) parses that file at start-up, about half of an
# xterm's start-up CPU; with it they map the parsed table (docs/
# architecture.md, "Sandbox lifecycle and reset in place").
#
# libX11 reads /var/cache/libx11/compose but never writes it: it writes a
# cache only for a non-root user, into $XCOMPOSECACHE. So an X client runs
# once as nobody against a private Xvfb, and its cache file is installed
# into the global directory, root's and read-only, as libX11 requires. The
# cache names the Compose file it was parsed from and is ignored once that
# file is newer. A host without the X packages, or a run without root,
# skips it: the cache only saves CPU.
#
# Usage: images/compose-cache.sh   (as root; make deps runs it)
set -eu

dir=/var/cache/libx11/compose
compose=/usr/share/X11/locale/en_US.UTF-8/Compose

if [ "$(id -u)" -ne 0 ]; then
	echo "compose-cache: not root; skipped" >&2
	exit 0
fi
for c in Xvfb xterm setpriv; do
	command -v "$c" >/dev/null || { echo "compose-cache: no $c; skipped" >&2; exit 0; }
done
[ -f "$compose" ] || { echo "compose-cache: no $compose; skipped" >&2; exit 0; }
# Up to date: a cache file newer than the Compose file.
if [ -d "$dir" ] && [ -n "$(find "$dir" -maxdepth 1 -type f -newer "$compose" 2>/dev/null)" ]; then
	exit 0
fi

tmp=$(mktemp -d)
xpid=
cleanup() {
	[ -z "$xpid" ] || kill "$xpid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
chown nobody "$tmp"
Xvfb -displayfd 3 -nolisten tcp -screen 0 64x64x24 3>"$tmp/display" 2>/dev/null &
xpid=$!
i=0
while [ ! -s "$tmp/display" ]; do
	i=$((i + 1))
	if [ "$i" -gt 100 ] || ! kill -0 "$xpid" 2>/dev/null; then
		echo "compose-cache: Xvfb did not start; skipped" >&2
		exit 0
	fi
	sleep 0.1
done
display=:$(cat "$tmp/display")
mkdir "$tmp/cache"
chown nobody "$tmp/cache"
chmod 0700 "$tmp/cache"
setpriv --reuid=nobody --regid=nogroup --clear-groups \
	env -i HOME=/nonexistent LANG=C.UTF-8 XCOMPOSECACHE="$tmp/cache" DISPLAY="$display" \
	timeout 20 xterm -e true 2>/dev/null || true
set -- "$tmp"/cache/*
if [ ! -f "$1" ]; then
	echo "compose-cache: no cache file written; skipped" >&2
	exit 0
fi
install -d -m 0755 -o root -g root "$dir"
for f in "$@"; do
	install -m 0644 -o root -g root "$f" "$dir/"
done
echo "compose-cache: wrote $dir"
