package testutil

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

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
