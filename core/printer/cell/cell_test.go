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

func TestFirstFew(t *testing.T) {
	for _, tt := range []struct {
		items []string
		show  int
		want  string
	}{
		{nil, 3, ""},
		{[]string{"a", "b"}, 3, "a, b"},
		{[]string{"a", "b", "c"}, 3, "a, b, c"},
		{[]string{"a", "b", "c", "d", "e"}, 3, "a, b, c and 2 more"},
	} {
		if got := FirstFew(tt.items, tt.show); got != tt.want {
			t.Errorf("FirstFew(%q, %d) = %q, want %q", tt.items, tt.show, got, tt.want)
		}
	}
}
