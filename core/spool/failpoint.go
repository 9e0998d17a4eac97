package spool

import (
	"os"

	"github.com/unyo-ops/unyo/core/internal/failpoint"
)

// FailpointEnv names the environment variable of a test hook: with
// UNYO_FAILPOINT=spool-append-mid (or spool-append-mid:N), the Nth write of
// appended records to a spool (the first if N is not given) writes half of
// its bytes and then kills the process with SIGKILL, as a crash in the
// middle of a write would. Integration tests use it to check recovery; it
// is not meant for anything else.
const FailpointEnv = failpoint.Env

const failpointAppendMid = "spool-append-mid"

// appendFailpoint returns after how many writes the spool-append-mid
// failpoint fires, or 0 if it is not set.
func appendFailpoint() int64 { return failpoint.After(failpointAppendMid) }

// crashMidWrite writes the first half of buf at off and kills the process.
func crashMidWrite(f *os.File, buf []byte, off int64) {
	_, _ = f.WriteAt(buf[:len(buf)/2], off)
	failpoint.Kill()
}
