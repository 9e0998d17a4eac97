// Package testutil holds helpers that tests across unyo share.
package testutil

import (
	"errors"
	"testing"
	"time"
)

// Eventually calls cond until it returns nil, failing the test with cond's
// last error once timeout has passed. Tests wait for conditions this way,
// never for a fixed time. It polls quickly at first and then every 250ms,
// so a condition that holds soon is seen soon and a slow one costs little.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after %v: %v", what, timeout, err)
			return // for a testing.TB whose Fatalf returns
		}
		time.Sleep(wait)
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// errNotYet is what Until reports for a condition that never held.
var errNotYet = errors.New("the condition never held")

// Until is Eventually for a condition that has nothing to say while it
// does not hold.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}
