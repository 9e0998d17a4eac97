package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-26T03:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	tests := []struct {
		name string
		in   Info
		bi   debug.BuildInfo
		want string
	}{
		{"ldflags win", Info{Version: "v1.2.3", Revision: "feedface"}, debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}, Settings: vcs}, "v1.2.3 (feedface, modified)"},
		{"checkout build", Info{}, debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "dev (0123456789ab, modified)"},
		{"go install", Info{}, debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, "v0.4.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fromBuildInfo(tt.in, &tt.bi)
			if got.Version == "" {
				got.Version = "dev"
			}
			if got.String() != tt.want {
				t.Errorf("got %q, want %q", got.String(), tt.want)
			}
		})
	}
}
