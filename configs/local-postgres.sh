#!/usr/bin/env bash
# A throwaway PostgreSQL for trying unyo's separate processes on one machine
# (the README's "Separate processes, PostgreSQL"): database "unyo", user
# "unyo" without a password, on 127.0.0.1:5433 only (no Unix socket).
#
#   configs/local-postgres.sh start    # once; prints the DSN configs/cluster.yaml uses
#   configs/local-postgres.sh stop     # stops it and deletes its data
#
# It needs Debian's postgresql package (apt-get install -y postgresql), whose
# tools live in /usr/lib/postgresql/VERSION/bin. PostgreSQL refuses to run as
# root: run as root, the script runs the server as the postgres user, with its
# data under /tmp (the postgres user cannot enter root's directories); as
# anyone else, under ./.unyo-pg.
set -euo pipefail

port=${UNYO_PG_PORT:-5433}
pointer=.unyo-pg.dir # where this checkout's server keeps its data

bindir=""
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && bindir=$d; done
if [ -z "$bindir" ] && command -v initdb >/dev/null; then bindir=$(dirname "$(command -v initdb)"); fi
if [ -z "$bindir" ]; then
	echo "local-postgres: no initdb found: install PostgreSQL (apt-get install -y postgresql)" >&2
	exit 1
fi

as=()
if [ "$(id -u)" = 0 ]; then
	as=(runuser -u postgres --)
fi

case "${1:-}" in
start)
	if [ -f "$pointer" ]; then
		echo "local-postgres: already set up in $(cat "$pointer"); run '$0 stop' first to start afresh" >&2
		exit 1
	fi
	if [ "${#as[@]}" -gt 0 ]; then
		dir=$(mktemp -d /tmp/unyo-pg.XXXXXX)
		chown postgres: "$dir"
	else
		dir=$PWD/.unyo-pg
		mkdir -p "$dir"
	fi
	echo "$dir" >"$pointer"
	"${as[@]}" "$bindir/initdb" -D "$dir/data" -U unyo -A trust -E UTF8 >"$dir/initdb.log"
	"${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
		-o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=''" start >/dev/null
	"${as[@]}" "$bindir/createdb" -h 127.0.0.1 -p "$port" -U unyo unyo
	echo "postgres://unyo@127.0.0.1:$port/unyo?sslmode=disable"
	;;
stop)
	if [ ! -f "$pointer" ]; then
		echo "local-postgres: nothing to stop (no $pointer here)" >&2
		exit 0
	fi
	dir=$(cat "$pointer")
	"${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -w -m fast stop >/dev/null || true
	rm -rf "$dir" "$pointer"
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
