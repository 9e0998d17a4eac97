#!/usr/bin/env bash
# Says whether plugins/provider-libvirt can be built here: it links libvirt
# through cgo, so it needs cgo on ($GO env CGO_ENABLED) and libvirt's
# development files (libvirt-dev, found by pkg-config). When it cannot, it
# says why on stderr and exits 1; make build and make dist then leave the
# plugin out and say so.
set -uo pipefail
GO=${GO:-go}
if [ "$($GO env CGO_ENABLED)" != 1 ]; then
  echo "provider-libvirt is not built: it needs cgo, and CGO_ENABLED is not 1 (a C compiler is needed)" >&2
  exit 1
fi
if ! command -v pkg-config >/dev/null || ! pkg-config --exists libvirt; then
  echo "provider-libvirt is not built: libvirt's development files are missing (apt-get install libvirt-dev pkg-config, or make deps)" >&2
  exit 1
fi
