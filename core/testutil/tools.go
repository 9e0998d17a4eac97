package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// CIEnv is the environment variable that marks a CI run: .ci/run sets
// CI=true, as most CI services do.
const CIEnv = "CI"

// InCI reports whether CI=true (or another true value of strconv.ParseBool).
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv(CIEnv))
	return ci
}

// Unavailable ends a test that cannot run here because something it needs
// is missing (an external tool, root): under CI it fails, since CI must not
// lose that coverage silently; elsewhere it skips. msg says what is missing
// and how to install it.
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (%s=true, so this fails instead of skipping)", msg, CIEnv)
		return
	}
	t.Skip(msg)
}

// NeedTool returns the first of candidates that is installed: a path is
// checked as it is, a bare name is looked up in PATH. When none is, it
// calls Unavailable, naming tool and how to install it, such as "apt-get
// install -y victoria-metrics".
func NeedTool(t testing.TB, tool, install string, candidates ...string) string {
	t.Helper()
	for _, c := range candidates {
		if strings.ContainsRune(c, os.PathSeparator) {
			if _, err := os.Stat(c); err == nil {
				return c
			}
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	Unavailable(t, fmt.Sprintf("%s is not installed (looked for %s); install it with `%s`", tool, strings.Join(candidates, ", "), install))
	return ""
}

// SkipsOrFailsWithoutTool runs test, a test of the calling package, in a
// child process whose env hides an external tool it needs, twice: as on a
// developer's machine it must skip, and with CI=true it must fail, both
// times saying why (its output holds why). CI treats a missing tool as a
// broken machine, not as a reason to pass.
func SkipsOrFailsWithoutTool(t *testing.T, test, why string, env ...string) {
	t.Helper()
	for _, tc := range []struct{ ci, want string }{
		{"", "--- SKIP: " + test},
		{"true", "--- FAIL: " + test},
	} {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+test+"$", "-test.v")
		cmd.Env = append(append(os.Environ(), env...), "CI="+tc.ci)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), why) {
			t.Errorf("CI=%q: want %q and %q, got:\n%s", tc.ci, tc.want, why, out)
		}
	}
}
