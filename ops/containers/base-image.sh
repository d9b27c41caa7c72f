#!/bin/sh
# The Dockerfile's base image where no image registry answers: Debian bookworm (Python 3.11)
# made from Debian's packages with debootstrap and imported into podman, shaped like
# python:3.11-slim (`python` and `pip` on PATH, from a venv in /opt/venv). Prints its tag.
#
# Cache: podman's own image store (per user: /var/lib/containers/storage for root), so every
# clone on the machine reuses it. The tag carries a hash of this file, the recipe: a change to
# the recipe makes a new image; to take Debian's newer packages, `podman rmi` the tag (or
# LOGWHEEL_BASE_REBUILD=1). Needs root (debootstrap, chroot), about a minute and 270 MB once.
# `base-image.sh --exists`: prints the tag and exits 0 only if it is made already.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"
tag="localhost/logwheel-base:bookworm-$(sha256sum "$here/base-image.sh" | cut -c1-12)"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [ "${1:-}" = --exists ]; then
    podman image exists "$tag" && echo "$tag"
    exit
fi
# builds of the same base (test files side by side, two clones) wait for each other
lock="${TMPDIR:-/tmp}/logwheel-base-image.lock"
exec 9>"$lock"
flock 9

if [ "${LOGWHEEL_BASE_REBUILD:-0}" != 1 ] && podman image exists "$tag"; then
    echo "$tag"
    exit 0
fi
for tool in debootstrap podman chroot; do
    command -v "$tool" >/dev/null || {
        echo "base-image.sh: no $tool: apt-get install -y podman runc debootstrap" >&2
        exit 1
    }
done
[ "$(id -u)" = 0 ] || { echo "base-image.sh: debootstrap needs root: run it as root" >&2; exit 1; }

rootfs=$(mktemp -d "${TMPDIR:-/tmp}/logwheel-base.XXXXXX")
trap 'rm -rf "$rootfs" "$rootfs.log"' EXIT
echo "base-image.sh: debootstrap bookworm from $mirror into $rootfs (about 40 s)" >&2
debootstrap --variant=minbase --include=python3,python3-venv bookworm "$rootfs" "$mirror" \
    >"$rootfs.log" 2>&1 || { tail -20 "$rootfs.log" >&2; exit 1; }
chroot "$rootfs" python3 -m venv /opt/venv
# what an image does not need: the downloaded packages, apt's lists (`apt-get update` fetches
# them again), documentation and translations (the copyright files stay)
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/man/* \
    "$rootfs"/usr/share/info/*
find "$rootfs"/usr/share/doc -type f ! -name copyright -delete
tar -C "$rootfs" --numeric-owner -c . | podman import --quiet \
    --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    - "$tag" >/dev/null
# earlier recipes' bases go, unless an image is built on them
for old in $(podman images --format '{{.Repository}}:{{.Tag}}' localhost/logwheel-base); do
    [ "$old" = "$tag" ] || podman rmi "$old" >/dev/null 2>&1 || true
done
echo "$tag"
