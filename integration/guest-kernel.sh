#!/usr/bin/env bash
# Downloads Debian's kernel package (the one linux-image-amd64 points to)
# and unpacks it, without installing it, into DIR for provider-libvirt's
# real-VM tests (plugins/provider-libvirt/virttest):
#   DIR/vmlinux        the uncompressed ELF kernel: QEMU boots it through
#                      PVH, without decompressing a bzImage (about 3 s to a
#                      shell under software emulation instead of 8-10 s)
#   DIR/vmlinuz        the bzImage it came from
#   DIR/modules/*.ko   the virtio modules the guest's init loads (Debian
#                      builds them as modules)
#   DIR/version        the kernel release
set -euo pipefail
dir=${1:?usage: guest-kernel.sh DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
pkg=$(kernel_pkg)
# Package lists not fetched yet on this machine.
[ -n "$pkg" ] || { apt-get update -qq; pkg=$(kernel_pkg); }
[ -n "$pkg" ] || { echo "guest-kernel: no kernel package behind linux-image-amd64" >&2; exit 1; }
# apt's sandbox user cannot write into a root-only temp dir.
chown _apt "$work" 2>/dev/null || true
(cd "$work" && apt-get download -qq "$pkg" >/dev/null)
dpkg-deb -x "$work"/"$pkg"_*.deb "$work/root"
release=${pkg#linux-image-}
mkdir -p "$dir.tmp/modules"
cp "$work/root/boot/vmlinuz-$release" "$dir.tmp/vmlinuz"
python3 - "$dir.tmp/vmlinuz" "$dir.tmp/vmlinux" <<'PY'
import lzma, sys
d = open(sys.argv[1], 'rb').read()
o = d.find(b'\xfd7zXZ\x00')
if o < 0:
    sys.exit('guest-kernel: the bzImage holds no xz payload')
open(sys.argv[2], 'wb').write(lzma.LZMADecompressor().decompress(d[o:]))
PY
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover net_failover virtio_net virtio_console virtio_blk; do
  f=$(find "$work/root/lib/modules/$release" -name "$m.ko" | head -1)
  [ -n "$f" ] || { echo "guest-kernel: module $m is missing from $pkg" >&2; exit 1; }
  cp "$f" "$dir.tmp/modules/"
done
echo "$release" > "$dir.tmp/version"
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
mv "$dir.tmp" "$dir"
echo "guest-kernel: $pkg unpacked into $dir"
