#!/usr/bin/env bash
# Makes a Debian bookworm base image from Debian's packages (debootstrap, minbase), for machines where
# no container registry answers: the images of containers/ then build on it with
# `--build-arg BASE=<name>`. Needs root, debootstrap and a container engine.
#
#   containers/base.sh [name]              default name: content-service/debian:bookworm
#
# CONTAINER_ENGINE: docker (default) or podman. DEBIAN_MIRROR: the mirror to bootstrap from; default:
# the first one this machine's apt sources name, else deb.debian.org. The mirror is read here, never
# written into the repository.
set -euo pipefail

name="${1:-content-service/debian:bookworm}"
engine="${CONTAINER_ENGINE:-docker}"
mirror="${DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
  mirror="$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
fi
if [[ -z "$mirror" ]]; then
  mirror="$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)"
fi
mirror="${mirror:-http://deb.debian.org/debian}"

rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm from $mirror"
debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
# The same sources for apt inside the image, and apt kept lean.
printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$rootfs/etc/apt/apt.conf.d/90lean"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | "$engine" import - "$name" >/dev/null
echo "imported $name"
