package nagios

import "testing"

func TestStatusFromExit(t *testing.T) {
	tests := []struct {
		code int
		want Status
		name string
	}{
		{0, OK, "OK"},
		{1, Warning, "WARNING"},
		{2, Critical, "CRITICAL"},
		{3, Unknown, "UNKNOWN"},
		{4, Unknown, "UNKNOWN"},
		{-1, Unknown, "UNKNOWN"},
		{126, Unknown, "UNKNOWN"}, // not executable
		{127, Unknown, "UNKNOWN"}, // not found
		{137, Unknown, "UNKNOWN"}, // SIGKILL
		{255, Unknown, "UNKNOWN"},
		{256, Unknown, "UNKNOWN"}, // would be 0 if truncated to a byte
		{-256, Unknown, "UNKNOWN"},
	}
	for _, tt := range tests {
		got := StatusFromExit(tt.code)
		if got != tt.want || got.String() != tt.name {
			t.Errorf("StatusFromExit(%d) = %v (%d), want %v", tt.code, got, int(got), tt.name)
		}
	}
}

func TestStatusString(t *testing.T) {
	if got := Status(9).String(); got != "Status(9)" {
		t.Errorf("Status(9).String() = %q", got)
	}
	if got := Status(-1).String(); got != "Status(-1)" {
		t.Errorf("Status(-1).String() = %q", got)
	}
}
