#!/usr/bin/env bash
# Regenerates the real-plugin part of testdata/corpus/ by running Debian's
# monitoring-plugins (apt-get install monitoring-plugins) on this machine.
# Every network check targets 127.0.0.1 only; the small servers some checks
# talk to are started here on loopback and stopped at the end.
#
# Output differs from machine to machine (load, disk sizes, timings), so after
# running this, regenerate and review the goldens:
#   go test ./checks/nagios/ -run TestCorpus -update
# Hand-written fixtures (hand_*) are not touched.
set -u
cd "$(dirname "$0")/corpus"
P=${PLUGINS:-/usr/lib/nagios/plugins}
HTTP_PORT=18080 SSH_PORT=18022 SMTP_PORT=18025

# Loopback-only fake servers, bounded to 120 s of life.
python3 - "$HTTP_PORT" "$SSH_PORT" "$SMTP_PORT" >/dev/null 2>&1 <<'EOF' &
import http.server, socketserver, sys, threading, time
http_port, ssh_port, smtp_port = map(int, sys.argv[1:4])
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
class SSH(socketserver.StreamRequestHandler):
    def handle(self):
        self.wfile.write(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n")
class SMTP(socketserver.StreamRequestHandler):
    def handle(self):
        self.wfile.write(b"220 localhost ESMTP fake\r\n")
        for line in self.rfile:
            if line.upper().startswith(b"QUIT"):
                self.wfile.write(b"221 bye\r\n"); return
            self.wfile.write(b"250 localhost\r\n")
socketserver.TCPServer.allow_reuse_address = True
for port, h in ((http_port, Quiet), (ssh_port, SSH), (smtp_port, SMTP)):
    s = socketserver.ThreadingTCPServer(("127.0.0.1", port), h)
    threading.Thread(target=s.serve_forever, daemon=True).start()
time.sleep(120)
EOF
SERVER=$!
trap 'kill $SERVER 2>/dev/null' EXIT
sleep 1

# run NAME COMMAND... : NAME.txt gets the exact stdout, NAME.stderr the stderr
# (only when non-empty), NAME.meta the command (without the plugin directory)
# and the exit code.
run() {
	local name=$1
	shift
	"$P/$1" "${@:2}" >"$name.txt" 2>"$name.stderr"
	local rc=$?
	[ -s "$name.stderr" ] || rm -f "$name.stderr"
	printf 'command: %s\nexit: %d\n' "$*" "$rc" >"$name.meta"
	echo "$name: exit $rc"
}

run check_load_ok          check_load -w 5,5,5 -c 10,10,10
run check_load_warning     check_load -w 0,0,0 -c 100,100,100
run check_load_critical_scaled check_load -r -w 0,0,0 -c 0.001,0.001,0.001
run check_load_usage       check_load
run check_disk_ok          check_disk -w 10% -c 5% -p /
run check_disk_warning     check_disk -w 99% -c 1% -p /
run check_disk_critical    check_disk -w 99% -c 98% -p / -p /dev/shm
run check_disk_gb          check_disk -u GB -w 10% -c 5% -p /
run check_disk_absolute    check_disk -w 1000 -c 500 -p / -p /dev/shm
run check_disk_missing     check_disk -w 10% -c 5% -p /nonexistent
run check_disk_usage       check_disk --bogus
run check_procs_ok         check_procs
run check_procs_critical   check_procs -w 10 -c 20
run check_procs_vsz        check_procs -w 1000 -c 2000 -m VSZ
run check_procs_range_crit check_procs -c 1:1 -C nosuchcommand
run check_procs_range_warn check_procs -w 5:5 -C nosuchcommand
run check_users_ok         check_users -w 5 -c 10
run check_users_inside     check_users -w :0 -c @0
run check_dummy_ok         check_dummy 0 hello
run check_dummy_warning    check_dummy 1 "warn text"
run check_dummy_critical   check_dummy 2
run check_dummy_unknown    check_dummy 3 unk
run check_dummy_bad_state  check_dummy 7
run check_dummy_usage      check_dummy
run check_swap_none        check_swap -w 10% -c 5%
run check_swap_none_ok     check_swap -w 10% -c 5% -n ok
run check_file_age_ok      check_file_age -w 100000000 -c 200000000 -f /etc/debian_version
run check_file_age_critical check_file_age -w 1 -c 2 -f /etc/debian_version
run check_file_age_missing check_file_age -w 60 -c 120 -f /nonexistent
run check_tcp_ok           check_tcp -H 127.0.0.1 -p "$HTTP_PORT"
run check_tcp_warning      check_tcp -H 127.0.0.1 -p "$HTTP_PORT" -w 0.000001 -c 10
run check_tcp_refused      check_tcp -H 127.0.0.1 -p 1
run check_http_ok          check_http -H 127.0.0.1 -p "$HTTP_PORT" -u /
run check_http_404         check_http -H 127.0.0.1 -p "$HTTP_PORT" -u /no-such-page
run check_http_slow        check_http -H 127.0.0.1 -p "$HTTP_PORT" -u / -w 0.000001 -c 10
run check_http_expect      check_http -H 127.0.0.1 -p "$HTTP_PORT" -u / -s "no such string"
run check_http_refused     check_http -H 127.0.0.1 -p 1
run check_curl_ok          check_curl -H 127.0.0.1 -p "$HTTP_PORT" -u /
run check_ssh_ok           check_ssh -H 127.0.0.1 -p "$SSH_PORT"
run check_ssh_refused      check_ssh -H 127.0.0.1 -p 1
run check_smtp_ok          check_smtp -H 127.0.0.1 -p "$SMTP_PORT"
run check_smtp_refused     check_smtp -H 127.0.0.1 -p 1
run check_ping_ok          check_ping -H 127.0.0.1 -w 100,20% -c 500,60% -p 3
run check_ping_critical    check_ping -H 127.0.0.1 -w 0.001,0% -c 0.002,0% -p 3
run check_ping_usage       check_ping -H 127.0.0.1 -w 100,20% -c 1,60%
run check_icmp_ok          check_icmp -H 127.0.0.1
run check_icmp_critical    check_icmp -H 127.0.0.1 -w 0.001,0% -c 0.002,0%
run check_dig_error        check_dig -l localhost -H 127.0.0.1
run check_dns_noresponse   check_dns -H localhost -s 127.0.0.1
run check_ntp_time_noresponse check_ntp_time -H 127.0.0.1
run check_time_refused     check_time -H 127.0.0.1
run check_udp_usage        check_udp -H 127.0.0.1 -p 9
run check_apt              check_apt
run check_apt_list         check_apt -l
run check_sensors_missing  check_sensors
