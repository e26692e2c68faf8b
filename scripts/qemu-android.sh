#!/usr/bin/env bash
# go test -exec wrapper for GOOS=android GOARCH=arm64 test binaries under
# qemu-aarch64-static. Android executables name /system/bin/linker64 as
# their ELF interpreter; Go's (CGO off) need nothing from it but the
# relocation of the position-independent binary, which glibc's aarch64
# loader (Debian package libc6-arm64-cross) does as well. Android's default
# temporary directory (/data/local/tmp) does not exist here: TMPDIR is kept.
set -euo pipefail
loader=/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1
if [ ! -e "$loader" ]; then
  echo "qemu-android: $loader not found (Debian package libc6-arm64-cross)" >&2
  exit 1
fi
root=${TMPDIR:-/tmp}/pipe-android-root
mkdir -p "$root/system/bin"
ln -sfn "$loader" "$root/system/bin/linker64"
export TMPDIR=${TMPDIR:-/tmp}
exec qemu-aarch64-static -L "$root" "$@"
