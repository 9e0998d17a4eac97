package eventrules

import "testing"

// The fast paths are what keeps 100 rules cheap; pin which patterns take
// them. Correctness against regexp is tested in match_test.go.
func TestCompilePatternFastPaths(t *testing.T) {
	tests := []struct {
		pattern          string
		literal          bool
		prefix, contains string
	}{
		{"web1", true, "web1", ""},
		{"(web1)", true, "web1", ""},
		{`web\.example\.com`, true, "web.example.com", ""},
		{"web.*", false, "web", ""},
		{"web1|web2", false, "web", ""},
		{"(?i)web1", false, "", ""},
		{".*refused.*", false, "", "refused"},
		{".*(timeout|refused) on port 8080.*", false, "", " on port 8080"},
		{"db.*-backup-.*", false, "db", "-backup-"},
		{"(abc)+d", false, "", "abc"},
		{"x{0,3}abc", false, "", "abc"},
		{"(?:foo)?bar", false, "", "bar"},
		{"ab|cd", false, "", ""},
		{".*", false, "", ""},
	}
	for _, tt := range tests {
		m, err := compilePattern(tt.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tt.pattern, err)
		}
		if m.literal != tt.literal || m.prefix != tt.prefix || m.contains != tt.contains {
			t.Errorf("%q: literal %v prefix %q contains %q; want %v %q %q",
				tt.pattern, m.literal, m.prefix, m.contains, tt.literal, tt.prefix, tt.contains)
		}
		if m.literal != (m.re == nil) {
			t.Errorf("%q: literal %v but re %v", tt.pattern, m.literal, m.re)
		}
	}
}
