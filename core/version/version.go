// Package version says which build of unyo is running: the release the
// Makefile stamps in with -ldflags, or else what the Go toolchain recorded
// (the module version of `go install ...@vX`, the VCS revision of a build
// from a checkout).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the Makefile: go build -ldflags "-X github.com/unyo-ops/unyo/core/version.version=v1.2.3
// -X github.com/unyo-ops/unyo/core/version.revision=abc123 -X ...buildDate=2026-01-02T03:04:05Z".
// They are variables only because the linker can set nothing else; nothing
// writes them at run time.
var (
	version   string
	revision  string
	buildDate string
)

// Info describes the running build.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	BuildDate string `json:"buildDate,omitempty"`
	Modified  bool   `json:"modified,omitempty"` // built from a checkout with uncommitted changes
	GoVersion string `json:"goVersion"`
}

// Get returns the running build's description.
func Get() Info {
	in := Info{Version: version, Revision: revision, BuildDate: buildDate, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		in = fromBuildInfo(in, bi)
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	return in
}

// fromBuildInfo fills what the linker flags left empty from the toolchain's
// record.
func fromBuildInfo(in Info, bi *debug.BuildInfo) Info {
	if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if in.Revision == "" {
				in.Revision = s.Value
			}
		case "vcs.time":
			if in.BuildDate == "" {
				in.BuildDate = s.Value
			}
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one-line form every status shows: "v1.2.3 (abc123456789)",
// "dev (abc123456789, modified)" or "dev".
func (in Info) String() string {
	var extra []string
	if in.Revision != "" {
		extra = append(extra, in.Revision[:min(12, len(in.Revision))])
	}
	if in.Modified {
		extra = append(extra, "modified")
	}
	if len(extra) == 0 {
		return in.Version
	}
	return fmt.Sprintf("%s (%s)", in.Version, strings.Join(extra, ", "))
}

// Short is Get().String().
func Short() string { return Get().String() }
