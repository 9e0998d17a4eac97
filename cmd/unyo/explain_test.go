package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/api"
)

func TestExplain(t *testing.T) {
	docs, err := schemaComments(api.Schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want []string // in the output, or the error
	}{
		{"check", []string{"KIND:     Check", "Checks applied centrally", "spec\t<CheckSpec>", "origin\t<string>", "Who manages this copy"}},
		{"checks.spec", []string{"FIELD:    spec <CheckSpec>", "node_selector\t<map[string]string>", "Labels a node must carry"}},
		{"check.spec.ttl", []string{"FIELD:    spec.ttl <string>", "Freshness (Go duration"}},
		{"rule.spec.match", []string{"KIND:     EventRule", "EventMatch selects events"}},
		{"check.spec.nope", []string{`CheckSpec has no field "nope" (it has: command, interval,`}},
		{"check.name.x", []string{"check.name.x: check.name is a string and has no fields"}},
		{"chek", []string{`unknown kind "chek"`}},
	} {
		var b bytes.Buffer
		err := explain(&b, tc.path, docs)
		got := b.String()
		if err != nil {
			got = err.Error()
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("explain %s lacks %q:\n%s", tc.path, w, got)
			}
		}
	}
}

func TestResolveID(t *testing.T) {
	ids := []string{"0190a1b2-0000-7000-8000-000000000001", "0190a1b2-0000-7000-8000-000000000002", "0190ffff-0000-7000-8000-000000000003"}
	for _, tc := range []struct{ arg, want string }{
		{"0190f", "0190ffff-0000-7000-8000-000000000003"},
		{"0190a1b2-0000-7000-8000-000000000002", "0190a1b2-0000-7000-8000-000000000002"},
		{"0190a", `alert ID prefix "0190a" is ambiguous: 2 alerts start with it`},
		{"zzz", "zzz"}, // the server says it is not found
	} {
		got, err := resolveID("alert", tc.arg, ids)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("resolveID(%q) = %s, want %s", tc.arg, got, tc.want)
		}
	}
}
