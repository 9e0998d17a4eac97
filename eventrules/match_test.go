package eventrules_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
)

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func TestMatches(t *testing.T) {
	labeled := func(e *unyov1.Event, kv ...string) *unyov1.Event {
		e.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			e.Labels[kv[i]] = kv[i+1]
		}
		return e
	}
	withOutput := func(e *unyov1.Event, out, long string) *unyov1.Event {
		e.Output, e.LongOutput = out, long
		return e
	}
	tests := []struct {
		name  string
		match *unyov1.EventMatch
		until string
		event *unyov1.Event
		want  bool
	}{
		// Patterns are anchored at both ends.
		{"literal node", &unyov1.EventMatch{Node: "web1"}, "", event("web1", "disk", critical), true},
		{"literal is not a substring search", &unyov1.EventMatch{Node: "web"}, "", event("web1", "disk", critical), false},
		{"literal is not a suffix search", &unyov1.EventMatch{Node: "eb1"}, "", event("web1", "disk", critical), false},
		{"prefix pattern", &unyov1.EventMatch{Node: "web.*"}, "", event("web12", "disk", critical), true},
		{"prefix pattern, other prefix", &unyov1.EventMatch{Node: "web.*"}, "", event("db1", "disk", critical), false},
		{"alternation", &unyov1.EventMatch{Node: "web1|web2"}, "", event("web2", "disk", critical), true},
		{"alternation is anchored", &unyov1.EventMatch{Node: "web1|web2"}, "", event("web12", "disk", critical), false},
		{"case-insensitive pattern", &unyov1.EventMatch{Node: "(?i)WEB1"}, "", event("web1", "disk", critical), true},
		{"capture group around literal", &unyov1.EventMatch{Node: "(web1)"}, "", event("web1", "disk", critical), true},
		{"dot is not literal", &unyov1.EventMatch{Node: "web.example"}, "", event("webxexample", "x", critical), true},
		{"escaped dot is literal", &unyov1.EventMatch{Node: `web\.example`}, "", event("webxexample", "x", critical), false},
		// \Q...\E quotes to the end when \E is missing; anchoring by text
		// would quote the anchor too and match "a.b)$".
		{`\Q without \E`, &unyov1.EventMatch{Node: `\Qa.b`}, "", event("a.b", "x", critical), true},
		{`\Q without \E does not quote the anchor`, &unyov1.EventMatch{Node: `\Qa.b`}, "", event("a.b)$", "x", critical), false},
		{"match-all pattern", &unyov1.EventMatch{Node: ".*"}, "", event("anything", "x", success), true},
		{"match-all on empty node", &unyov1.EventMatch{Node: ".*"}, "", event("", "x", success), true},

		// Every given condition must hold: the seeds let the last condition
		// checked decide alone.
		{"node and check both hold", &unyov1.EventMatch{Node: "web1", Check: "disk"}, "", event("web1", "disk", critical), true},
		{"node holds, check does not", &unyov1.EventMatch{Node: "web1", Check: "disk"}, "", event("web1", "cpu", critical), false},
		{"check holds, node does not", &unyov1.EventMatch{Node: "web1", Check: "disk"}, "", event("db1", "disk", critical), false},
		{"levels hold, node does not", &unyov1.EventMatch{Node: "web1", Levels: []string{"critical"}}, "", event("db1", "disk", critical), false},
		{"labels hold, message does not", &unyov1.EventMatch{Message: "DISK.*", Labels: map[string]string{"rack": "a1"}}, "", labeled(withOutput(event("w", "d", critical), "CPU high", ""), "rack", "a1"), false},
		{"message holds, labels do not", &unyov1.EventMatch{Message: "DISK.*", Labels: map[string]string{"rack": "a1"}}, "", labeled(withOutput(event("w", "d", critical), "DISK full", ""), "rack", "b2"), false},
		{"all five hold", &unyov1.EventMatch{Node: "web.*", Check: "disk", Message: ".*97%.*", Levels: []string{"critical"}, Labels: map[string]string{"rack": "a1"}}, "", labeled(withOutput(event("web1", "disk", critical), "DISK CRITICAL - / 97% used", ""), "rack", "a1"), true},

		// Levels: the seeds ignored them.
		{"level in set", &unyov1.EventMatch{Levels: []string{"warning", "critical"}}, "", event("w", "d", warning), true},
		{"level not in set", &unyov1.EventMatch{Levels: []string{"critical"}}, "", event("w", "d", warning), false},
		{"success not in set", &unyov1.EventMatch{Levels: []string{"critical"}}, "", event("w", "d", success), false},
		{"unspecified level never in a set", &unyov1.EventMatch{Levels: []string{"success", "warning", "critical"}}, "", event("w", "d", unyov1.Level_LEVEL_UNSPECIFIED), false},
		{"out-of-range level never in a set", &unyov1.EventMatch{Levels: []string{"critical"}}, "", event("w", "d", unyov1.Level(99)), false},
		{"negative level never in a set", &unyov1.EventMatch{Levels: []string{"critical"}}, "", event("w", "d", unyov1.Level(-1)), false},
		{"no levels: any level", &unyov1.EventMatch{Node: "w"}, "", event("w", "d", unyov1.Level_LEVEL_UNSPECIFIED), true},

		// Until: the seeds ignored it.
		{"until in the future", &unyov1.EventMatch{Node: "w"}, "2026-06-01T12:00:01Z", event("w", "d", critical), true},
		{"until in the past", &unyov1.EventMatch{Node: "w"}, "2026-06-01T11:59:59Z", event("w", "d", critical), false},
		{"until exactly now", &unyov1.EventMatch{Node: "w"}, "2026-06-01T12:00:00Z", event("w", "d", critical), false},
		{"until in another zone", &unyov1.EventMatch{Node: "w"}, "2026-06-01T21:00:01+09:00", event("w", "d", critical), true},

		// Labels.
		{"label present", &unyov1.EventMatch{Labels: map[string]string{"rack": "a1"}}, "", labeled(event("w", "d", critical), "rack", "a1", "zone", "z"), true},
		{"label missing", &unyov1.EventMatch{Labels: map[string]string{"rack": "a1"}}, "", labeled(event("w", "d", critical), "zone", "z"), false},
		{"label other value", &unyov1.EventMatch{Labels: map[string]string{"rack": "a1"}}, "", labeled(event("w", "d", critical), "rack", "a2"), false},
		{"labels: every one must hold", &unyov1.EventMatch{Labels: map[string]string{"rack": "a1", "zone": "z"}}, "", labeled(event("w", "d", critical), "rack", "a1"), false},
		{"empty value requires presence", &unyov1.EventMatch{Labels: map[string]string{"canary": ""}}, "", labeled(event("w", "d", critical)), false},
		{"empty value present", &unyov1.EventMatch{Labels: map[string]string{"canary": ""}}, "", labeled(event("w", "d", critical), "canary", ""), true},
		{"nil event labels", &unyov1.EventMatch{Labels: map[string]string{"rack": "a1"}}, "", event("w", "d", critical), false},

		// Message is the first output line only.
		{"message on output", &unyov1.EventMatch{Message: "DISK .*"}, "", withOutput(event("w", "d", critical), "DISK full", "details"), true},
		{"message not on long output", &unyov1.EventMatch{Message: "details"}, "", withOutput(event("w", "d", critical), "DISK full", "details"), false},
		{"message anchored", &unyov1.EventMatch{Message: "full"}, "", withOutput(event("w", "d", critical), "DISK full", ""), false},

		{"nil event", &unyov1.EventMatch{Node: ".*"}, "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec("filter", tt.match)
			s.Until = tt.until
			r := mustCompile(t, "r", s)
			if got := r.Matches(tt.event, now); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestZeroRuleMatchesNothing(t *testing.T) {
	var r eventrules.Rule
	if r.Matches(event("w", "d", critical), now) {
		t.Error("zero Rule matched")
	}
}

// The literal and prefix fast paths must agree with the regexp they stand
// in for. The reference is "the leftmost-longest match is the whole string",
// computed without anchoring text.
func TestPatternFastPathsAgreeWithRegexp(t *testing.T) {
	patterns := []string{
		"web1", "web", "web.*", "web[0-9]+", "web1|web2", "web1|db1", "(web1)", "(?i)web1",
		`web\.example\.com`, "web.example.com", "", ".*", ".+", "w?eb1", "web1?", `\Qweb1`,
		`\Qa.b\E.*`, "(?:web)1", "^web1$", "web1$", "^web", "(?m)^web1$", `\Aweb1\z`, "a|", "|a",
		"ab*", "a*b", "(?s).*", `\d+`, "[a-c]+1", "é+", "日本",
		// Patterns with a literal inside, for the "contains" pre-test.
		".*refused.*", ".*(timeout|refused) on port 80.*", "web(1|2)\\.example.*", "(abc)+d", "(?:ab){2,}c",
		"x{0,3}abc", "(?:foo)?bar", "ab|cd", ".*(?i:abc).*", "(?i).*abc.*", ".*a(?i)bc.*", "(?U).*refused.*",
		".*on port (80|81)[0-9]", "[^x]*refused[^x]*", "(?:refused)*x", "(re)?fused.*",
	}
	inputs := []string{"", "web", "web1", "web2", "web12", "Web1", "WEB1", "db1", "web.example.com",
		"webxexample.com", "a.b", "a.bc", "a", "b", "ab", "abbb", "aab", "123", "é", "ééé", "日本", "\n", "web1\n", "x\nweb1",
		"connection refused on port 8080", "timeout on port 8099 after 10s", "refused", "REFUSED", "xxabc", "abc",
		"ABC", "aBC", "abcabcd", "ababc", "abababc", "foobar", "bar", "cd", "web2.example.org", "fused", "x", "on port 81x",
		"on port 812"}
	for _, p := range patterns {
		if p == "" {
			continue // an empty pattern is "not given"
		}
		r := mustCompile(t, "r", spec("filter", &unyov1.EventMatch{Node: p}))
		ref := regexp.MustCompile(p)
		ref.Longest()
		for _, in := range inputs {
			loc := ref.FindStringIndex(in)
			want := loc != nil && loc[0] == 0 && loc[1] == len(in)
			if got := r.Matches(&unyov1.Event{Node: in}, now); got != want {
				t.Errorf("pattern %q on %q: Matches = %v, regexp says %v", p, in, got, want)
			}
		}
	}
}
