package apihook

import (
	"net/http"
	"testing"
	"time"
)

// Vectors from prometheus/common's model/signature_test.go.
func TestFingerprintMatchesPrometheus(t *testing.T) {
	tests := []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{}, "cbf29ce484222325"},                                                                                // 14695981039346656037
		{map[string]string{"name": "garland, briggs", "fear": "love is not enough"}, "507a62d79ee76c9a"},                         // 5799056148416392346
		{map[string]string{"name": "garland, briggs", "fear": "love is not enough", "severity": "critical"}, "507a62d79ee76c9a"}, // severity left out
	}
	for _, tt := range tests {
		if got := fingerprint(tt.labels, "severity"); got != tt.want {
			t.Errorf("fingerprint(%v) = %s, want %s", tt.labels, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	cfg := Config{BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	for n, want := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000} {
		want *= time.Millisecond
		for range 50 {
			if d := backoff(cfg, n+1, -1); d < want/2 || d > want {
				t.Fatalf("backoff after attempt %d = %v, want in [%v, %v]", n+1, d, want/2, want)
			}
		}
	}
	if d := backoff(cfg, 1000, -1); d > time.Second {
		t.Errorf("backoff after attempt 1000 = %v, want at most the max", d)
	}
	if d := backoff(Config{}, 1, -1); d < 250*time.Millisecond || d > 500*time.Millisecond {
		t.Errorf("default first backoff = %v, want in [250ms, 500ms]", d)
	}
	if d := backoff(cfg, 1, 700*time.Millisecond); d != 700*time.Millisecond {
		t.Errorf("with Retry-After 700ms: %v", d)
	}
	if d := backoff(cfg, 1, time.Hour); d != time.Second {
		t.Errorf("with Retry-After 1h: %v, want the max", d)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	tests := map[string]time.Duration{
		"":     -1,
		"soon": -1,
		"-3":   -1,
		"0":    0,
		" 7 ":  7 * time.Second,
		now.Add(20 * time.Second).Format(http.TimeFormat): 20 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
	}
	for in, want := range tests {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := map[string]string{
		"https://hooks.example.com/unyo":               "https://hooks.example.com/unyo",
		"https://u:p@hooks.example.com/x?token=1#frag": "https://u:xxxxx@hooks.example.com/x?...",
		"http://127.0.0.1:8080/a%20b":                  "http://127.0.0.1:8080/a%20b",
		"http://[::1":                                  "(invalid URL)",
	}
	for in, want := range tests {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
