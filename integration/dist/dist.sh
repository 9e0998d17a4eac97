#!/usr/bin/env bash
# make dist: the release tarball and Debian packages, from the checkout's
# root after `make build man`:
#   dist/unyo-VERSION-linux-ARCH.tar.gz   bin/unyo, bin/unyo-agent, lib/unyo/plugins/*
#       (provider-libvirt only where cgo and libvirt-dev are:
#       integration/dist/have-libvirt.sh),
#       etc/unyo/*.yaml, lib/systemd/system/*.service,
#       share/unyo/prometheus/unyo-rules.yml, share/man/man1/*.1
#   dist/unyo_VERSION_ARCH.deb            the same laid out for Debian
# The packages are built by nfpm's Go module (integration/dist/mkdeb, its
# own module so that nfpm's dependencies stay out of unyo's go.mod).
set -euo pipefail
GO=${GO:-go}
VERSION=${VERSION:-dev}
ARCH=$($GO env GOARCH)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
name=unyo-$VERSION-linux-$ARCH
root=$stage/$name
mkdir -p "$root"/{bin,lib/unyo/plugins,etc/unyo,lib/systemd/system,share/unyo/prometheus,share/man/man1}
cp bin/unyo bin/unyo-agent "$root/bin/"
plugins="action-exec action-smtp check-http check-tcp provider-exec provider-docker provider-xdp provider-vpp"
# provider-libvirt links libvirt through cgo: in the release when this
# machine can build it, left out saying why otherwise.
if GO=$GO bash integration/dist/have-libvirt.sh; then
  plugins="$plugins provider-libvirt"
else
  echo "make dist: lib/unyo/plugins/provider-libvirt left out of the release (see above)" >&2
fi
for p in $plugins; do
  $GO build -trimpath -ldflags='-s -w' -o "$root/lib/unyo/plugins/$p" "./plugins/$p"
done
cp configs/root.yaml configs/cluster.yaml configs/agent.yaml "$root/etc/unyo/"
cp configs/systemd/*.service "$root/lib/systemd/system/"
cp configs/prometheus/unyo-rules.yml "$root/share/unyo/prometheus/"
cp bin/man/*.1 "$root/share/man/man1/"
mkdir -p dist
tar -C "$stage" -czf "dist/$name.tar.gz" "$name"
echo "dist/$name.tar.gz"
# Debian versions must start with a digit.
debver=${VERSION#v}
[[ $debver =~ ^[0-9] ]] || debver=0.0.0~$debver
(cd integration/dist/mkdeb && $GO run . -root "$root" -version "$debver" -arch "$ARCH" -out "$OLDPWD/dist")
