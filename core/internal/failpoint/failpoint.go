// Package failpoint lets integration tests crash a process at a named point
// of its work, as a power cut or kill -9 would, to check what survives:
// UNYO_FAILPOINT=NAME (or NAME:N) kills the process with SIGKILL when it
// passes that point for the Nth time (the first if N is not given). Nothing
// else sets that variable; without it every point costs a nil check.
package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// Env is the environment variable that selects a failpoint.
const Env = "UNYO_FAILPOINT"

// After returns on which pass the point named name fires, or 0 when
// UNYO_FAILPOINT does not select it.
func After(name string) int64 {
	v, ok := strings.CutPrefix(os.Getenv(Env), name)
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

// Point is one named point; a nil Point never fires.
type Point struct {
	after  int64
	passes atomic.Int64
}

// New returns the point named name if UNYO_FAILPOINT selects it, else nil.
func New(name string) *Point {
	n := After(name)
	if n == 0 {
		return nil
	}
	return &Point{after: n}
}

// Pass counts one pass and kills the process on the selected one.
func (p *Point) Pass() {
	if p != nil && p.passes.Add(1) == p.after {
		Kill()
	}
}
