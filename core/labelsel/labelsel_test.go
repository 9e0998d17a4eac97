package labelsel

import (
	"strings"
	"testing"
)

func TestSelector(t *testing.T) {
	web := map[string]string{"env": "prod", "tier": "web", "gpu": ""}
	db := map[string]string{"env": "staging", "tier": "db"}
	for _, tc := range []struct {
		sel     string
		web, db bool
		err     string
	}{
		{"", true, true, ""},
		{"env=prod", true, false, ""},
		{"env==prod", true, false, ""},
		{"env!=prod", false, true, ""},
		{"team!=x", true, true, ""}, // not set: not equal
		{"tier in (web, api)", true, false, ""},
		{"tier notin (web,api)", false, true, ""},
		{"team notin (a)", true, true, ""},
		{"gpu", true, false, ""},
		{"!gpu", false, true, ""},
		{"env in (prod,staging),tier=db", false, true, ""},
		{" env = prod , gpu ", true, false, ""},
		{"env=", false, false, ""}, // set to the empty value
		{"a,,b", false, false, "an empty requirement"},
		{"tier in web", false, false, "expected in (value,...)"},
		{"tier in ()", false, false, "no values"},
		{"=x", false, false, `"" is not a label key`},
	} {
		s, err := Parse(tc.sel)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) error %v, want %q", tc.sel, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.sel, err)
			continue
		}
		if s.Matches(web) != tc.web || s.Matches(db) != tc.db {
			t.Errorf("%q matches web %v db %v, want %v %v", tc.sel, s.Matches(web), s.Matches(db), tc.web, tc.db)
		}
	}
}
