package cell

import "testing"

func TestCells(t *testing.T) {
	for _, tt := range []struct{ name, got, want string }{
		{"command quotes what a shell would split", Command([]string{"check_file_age", "-f", "/var/backups/last run", "it's", ""}), `check_file_age -f '/var/backups/last run' 'it'\''s' ''`},
		{"no command", Command(nil), "-"},
		{"labels sorted", Labels(map[string]string{"zone": "a", "role": "web"}, "<none>"), "role=web,zone=a"},
		{"no labels", Labels(nil, "<all>"), "<all>"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}
