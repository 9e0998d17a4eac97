package testutil

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// fatalTB records Fatalf and Skip instead of ending the test, to test how
// helpers end one.
type fatalTB struct {
	testing.TB
	msg     string
	skipped bool
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}
func (f *fatalTB) Skip(args ...any) {
	f.msg, f.skipped = fmt.Sprint(args...), true
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, 10*time.Second, "the third call", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}

	f := &fatalTB{TB: t}
	Eventually(f, 0, "never", func() error { return errors.New("still broken") })
	if want := "never: not so after 0s: still broken"; f.msg != want {
		t.Errorf("failure = %q, want %q", f.msg, want)
	}
}

func TestUntil(t *testing.T) {
	n := 0
	Until(t, 10*time.Second, "the second call", func() bool { n++; return n == 2 })
	f := &fatalTB{TB: t}
	Until(f, 0, "never", func() bool { return false })
	if f.msg == "" {
		t.Error("Until did not fail for a condition that never held")
	}
}
