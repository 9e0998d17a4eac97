#!/usr/bin/env bash
# Installs the Debian packages the tests use: real PostgreSQL, Debian's
# monitoring-plugins, VictoriaMetrics and ClickHouse servers, an SMTP
# server (aiosmtpd) for the smtp action plugin, Graphviz (the network
# diagram goldens are rendered by dot), Prometheus Alertmanager
# (the side-by-side benchmark and its harness test), Prometheus and
# systemd-analyze (self-monitoring and packaging tests), Prometheus's node
# exporter (beside the agent in the RSS benchmark), icinga2-bin (beside the
# agent in the check-run CPU benchmark), nagios4-common (its
# example configuration is what unyo import nagios is tested on),
# Chromium (the web console's browser tests drive it headless), and
# docker.io with busybox-static (provider-docker's tests start a private
# dockerd and import a busybox image built from the static binary; the
# package starts no daemon: policy-rc.d), libvirt with qemu
# (provider-libvirt's tests: libvirt-dev for the cgo binding, the daemon
# for the test driver served over a private socket, qemu-system-x86 and
# qemu-utils for real VMs under software emulation, cpio), a Debian
# kernel downloaded and unpacked, not installed, into $UNYO_TEST_KERNEL_DIR
# (the guests' kernel: an uncompressed PVH vmlinux and its virtio modules).
# and clang and libbpf-dev (only to regenerate provider-xdp's BPF object: go
# generate; building needs neither) and iptables (provider-xdp's benchmark
# compares its XDP path with iptables DNAT). Runs apt-get only as root and
# only for what is missing.
set -euo pipefail
need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
[ -x /usr/lib/nagios/plugins/check_load ] || need+=(monitoring-plugins-basic monitoring-plugins-standard)
command -v runuser >/dev/null || need+=(util-linux)
command -v victoria-metrics >/dev/null || need+=(victoria-metrics)
command -v clickhouse-server >/dev/null || need+=(clickhouse-server clickhouse-client)
/usr/bin/python3 -c 'import aiosmtpd' 2>/dev/null || need+=(python3-aiosmtpd)
[ -x /usr/bin/prometheus-alertmanager ] || need+=(prometheus-alertmanager)
[ -x /usr/bin/prometheus-node-exporter ] || need+=(prometheus-node-exporter)
[ -x /usr/sbin/icinga2 ] || need+=(icinga2-bin)
# Prometheus scrapes unyo's /metrics; promtool lints it and queries the
# Prometheus API; systemd-analyze verifies the units in configs/systemd.
[ -x /usr/bin/prometheus ] || need+=(prometheus)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v dot >/dev/null || need+=(graphviz)
[ -f /etc/nagios4/nagios.cfg ] || need+=(nagios4-common)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/sbin/dockerd ] || need+=(docker.io)
[ -x /bin/busybox ] || need+=(busybox-static)
pkg-config --exists libvirt 2>/dev/null || need+=(libvirt-dev pkg-config)
[ -x /usr/sbin/libvirtd ] || need+=(libvirt-daemon)
[ -f /usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so ] || need+=(libvirt-daemon-driver-qemu)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v qemu-img >/dev/null || need+=(qemu-utils)
command -v cpio >/dev/null || need+=(cpio)
# ip and sysctl: the per-port network namespace test links its node
# namespaces by hand (nsenter comes with util-linux).
command -v ip >/dev/null || need+=(iproute2)
command -v sysctl >/dev/null || need+=(procps)
command -v clang >/dev/null || need+=(clang)
[ -f /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
command -v iptables >/dev/null || [ -x /usr/sbin/iptables ] || need+=(iptables)
kernel_dir=${UNYO_TEST_KERNEL_DIR:-/var/cache/unyo-test/linux}
if [ ${#need[@]} -eq 0 ]; then
  [ -f "$kernel_dir/vmlinux" ] || [ "$(id -u)" -ne 0 ] || bash "$(dirname "$0")/guest-kernel.sh" "$kernel_dir"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${need[*]}; run as root (or install them) for the full suite" >&2
  exit 0
fi
echo "install-deps: apt-get install ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
[ -f "$kernel_dir/vmlinux" ] || bash "$(dirname "$0")/guest-kernel.sh" "$kernel_dir"
