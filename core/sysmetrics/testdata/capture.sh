#!/bin/sh
# capture.sh copies the /proc and /sys files read by package sysmetrics into
# testdata/<distro>-kernel-$(uname -r)/ so the golden tests run on real data.
# /proc files report st_size 0, so they are copied with cat, never cp.
# Review the result before committing: mounts and process names are host data.
set -eu
cd "$(dirname "$0")"
. /etc/os-release
dst="${ID}${VERSION_ID}-kernel-$(uname -r)"
rm -rf "$dst"
grab() { mkdir -p "$dst/$(dirname "$1")"; cat "/$1" >"$dst/$1"; }
for f in stat loadavg uptime meminfo vmstat buddyinfo diskstats net/dev net/snmp net/netstat; do
	grab "proc/$f"
done
mkdir -p "$dst/proc/self" && cat /proc/self/mounts >"$dst/proc/self/mounts"
for n in /sys/devices/system/node/node[0-9]*; do
	grab "${n#/}/meminfo"
	for h in "$n"/hugepages/hugepages-*; do
		[ -d "$h" ] || continue
		for f in nr_hugepages free_hugepages surplus_hugepages; do grab "${h#/}/$f"; done
	done
done
for b in /sys/class/block/*; do
	[ -e "$b/partition" ] && grab "${b#/}/partition"
done
# A handful of processes in distinct states: a sleeper whose comm holds
# ") " (the reason the state is looked up after the last ')'), a zombie,
# a stopped process, kernel threads, and the reading cat itself (R).
tmp=$(mktemp -d)
cp /bin/sleep "$tmp/x) (y"
"$tmp/x) (y" 30 & s=$!
sh -c 'sleep 0 & exec sleep 30' & z=$!
sleep 30 & t=$!; kill -STOP $t
sleep 1
for p in 2 $(ps -eo pid=,stat= | awk '$2 ~ /^I/ {print $1; exit}') $s $z $(pgrep -P $z) $t; do
	grab "proc/$p/stat"
done
mkdir -p "$dst/proc/self-stat" && cat /proc/self/stat >"$dst/proc/self-stat/stat"
p=$(awk '{print $1}' "$dst/proc/self-stat/stat"); mv "$dst/proc/self-stat" "$dst/proc/$p"
kill -CONT $t; kill $s $z $t 2>/dev/null || true; wait 2>/dev/null || true
rm -rf "$tmp"
[ -e /run/utmp ] && grab run/utmp
echo "captured into $dst"
