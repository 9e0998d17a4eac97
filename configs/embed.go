// Package configs holds unyo's example configurations; the example checks
// are built into the binary for `unyo dev`.
package configs

import _ "embed"

// ExampleChecks is resources/checks.yaml, the check set `unyo dev` starts with.
//
//go:embed resources/checks.yaml
var ExampleChecks []byte

// DefaultRules is resources/rules.yaml, the event rules `unyo dev` starts
// with: alerts for critical results and for nodes that are down.
//
//go:embed resources/rules.yaml
var DefaultRules []byte
