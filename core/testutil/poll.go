// Package testutil holds helpers that tests across unyo share.
package testutil

import (
	"testing"
	"time"
)

// Eventually calls cond until it returns nil, failing the test with cond's
// last error once timeout has passed. Tests wait for conditions this way,
// never for a fixed time.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := 10 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after %v: %v", what, timeout, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 250*time.Millisecond)
	}
}
