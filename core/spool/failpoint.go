package spool

import (
	"os"
	"strconv"
	"strings"
)

// FailpointEnv names the environment variable of a test hook: with
// UNYO_FAILPOINT=spool-append-mid (or spool-append-mid:N), the Nth write of
// appended records to a spool (the first if N is not given) writes half of
// its bytes and then kills the process with SIGKILL, as a crash in the
// middle of a write would. Integration tests use it to check recovery; it
// is not meant for anything else.
const FailpointEnv = "UNYO_FAILPOINT"

const failpointAppendMid = "spool-append-mid"

// appendFailpoint returns after how many writes the spool-append-mid
// failpoint fires, or 0 if it is not set.
func appendFailpoint() int64 {
	v, ok := strings.CutPrefix(os.Getenv(FailpointEnv), failpointAppendMid)
	if !ok {
		return 0
	}
	if v == "" {
		return 1
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(v, ":"), 10, 64)
	if err != nil || n < 1 || !strings.HasPrefix(v, ":") {
		return 0
	}
	return n
}
