#!/usr/bin/env bash
# fuzz.sh TIME PKG:TARGET... fuzzes each target for TIME.
#
# A real finding always writes its input under the package's testdata/fuzz
# ("Failing input written to ..."), where `go test` replays it from then on.
# Go 1.26's fuzz coordinator can also fail a target with a bare "context
# deadline exceeded" when -fuzztime runs out while a worker is mid-call
# (golang/go#75804, fixed in Go 1.27): the target ran its whole time and
# found nothing. That case is reported and retried once; anything else
# fails.
set -uo pipefail
fuzztime=$1
shift
go=${GO:-go}
for t in "$@"; do
	pkg=${t%%:*} target=${t#*:}
	for attempt in 1 2; do
		echo "fuzz $t for $fuzztime"
		out=$("$go" test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" 2>&1)
		rc=$?
		printf '%s\n' "$out"
		[ "$rc" -eq 0 ] && break
		if [ "$attempt" -eq 1 ] && grep -q 'context deadline exceeded' <<<"$out" &&
			! grep -Eq 'Failing input written|panic:|fuzz_test.go:[0-9]+:' <<<"$out"; then
			echo "fuzz $t: the fuzz coordinator's deadline race (golang/go#75804), no failing input; once more"
			continue
		fi
		exit "$rc"
	done
done
