// Package vmflags is the one place unyo writes the process-wide flags that
// VictoriaMetrics and VictoriaLogs read their settings from. Both panic when
// flag.CommandLine was never parsed (lib/memory: "must be called only after
// flag.Parse"), which `go test` hides by parsing flags itself, so every
// embedded store calls Prepare before it starts.
package vmflags

import (
	"flag"
	"fmt"
)

// Prepare sets each name to its value on flag.CommandLine (leaving a flag
// alone that already has it: VictoriaMetrics' background goroutines keep
// reading some, and writing one under them is a data race) and parses the
// command line once, with no arguments, if the host has not parsed it.
func Prepare(values ...[2]string) error {
	for _, kv := range values {
		f := flag.CommandLine.Lookup(kv[0])
		if f == nil {
			return fmt.Errorf("VictoriaMetrics has no flag -%s", kv[0])
		}
		if f.Value.String() == kv[1] {
			continue
		}
		if err := flag.CommandLine.Set(kv[0], kv[1]); err != nil {
			return fmt.Errorf("set VictoriaMetrics flag -%s=%s: %w", kv[0], kv[1], err)
		}
	}
	// Parse an empty list only when the host has not parsed flags itself, to
	// leave its flag.Args alone.
	if !flag.CommandLine.Parsed() {
		if err := flag.CommandLine.Parse(nil); err != nil {
			return fmt.Errorf("parse VictoriaMetrics flags: %w", err)
		}
	}
	return nil
}
