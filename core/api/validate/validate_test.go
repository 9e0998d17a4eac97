package validate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/validate"
)

func TestName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true}, {"0", true}, {"disk", true}, {"node-1.example.com", true}, {"a_b", true},
		{strings.Repeat("a", validate.MaxNameLength), true},
		{"", false}, {"Node1", false}, {"-a", false}, {"a-", false}, {".a", false}, {"a.", false},
		{"a b", false}, {"ä", false}, {strings.Repeat("a", validate.MaxNameLength+1), false},
	} {
		if err := validate.Name(tc.name); (err == nil) != tc.ok {
			t.Errorf("Name(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestFields(t *testing.T) {
	var f validate.Fields
	f.Name("name", "Bad")
	f.Addf("spec.x", "must be %d", 1)
	if d, ok := f.Duration("spec.wait", "5m"); !ok || d != 5*time.Minute {
		t.Errorf("Duration(5m) = %v, %v", d, ok)
	}
	if _, ok := f.Duration("spec.interval", "soon"); ok {
		t.Error("Duration(soon) succeeded")
	}
	want := `event rule "Bad": name: "Bad" is not a valid name: use lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or digit
event rule "Bad": spec.x: must be 1
event rule "Bad": spec.interval: invalid duration "soon" (expected a Go duration such as 30s or 5m)`
	if got := validate.Message("event rule", "Bad", f); got != want {
		t.Errorf("Message:\n%s\nwant:\n%s", got, want)
	}
	if got, want := validate.Message("check", "", f[:1]), "unnamed check: name: "+f[0].Description; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
}

func TestEnvName(t *testing.T) {
	for _, tc := range []struct {
		name, wantErr string
	}{
		{"HTTPS_PROXY", ""}, {"lower_case", ""},
		{"", "a variable name is empty"},
		{"A=B", "must not contain '='"},
		{"A\x00", "or a NUL byte"},
	} {
		err := validate.EnvName(tc.name)
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("EnvName(%q) = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}
