#!/bin/sh
# The Dockerfile's image built by podman FROM the local Debian base (base-image.sh):
#   build-image.sh TAG [TARGET]     (TARGET: job, the default, or backfill)
# Layers are cached: a change to logwheel's code rebuilds the wheel only (about 10 s). pip in
# the build trusts the CA bundle pip trusts here (PIP_CERT), given as a build secret that
# stays out of the image. With Docker and the public python image, `docker build` needs none
# of this.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"
tag=$1
target=${2:-job}
base=$("$here/base-image.sh")
cert=${PIP_CERT:-${SSL_CERT_FILE:-}}
if [ -n "$cert" ] && [ -f "$cert" ]; then
    set -- --secret "id=pip-cert,src=$cert"
else
    set --
fi
exec podman build --quiet --format docker --network host --target "$target" \
    --build-arg "BASE=$base" "$@" -t "$tag" "$here/../.."
