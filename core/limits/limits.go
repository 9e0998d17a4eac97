// Package limits holds the bounds servers put on what clients send and
// store: output sizes, label sets, list sizes, report times and addresses.
// Every check names the field as the client wrote it, the bound and what
// was sent, so that an operator reading the error knows what to change.
package limits

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

const (
	// MaxOutput bounds a result's output and long output, each, as the
	// cluster stores them. Agents cut at agent.max_output (64 KiB by
	// default); the cluster cuts what is longer than this and marks the
	// result truncated, as the agent does.
	MaxOutput = 1 << 20
	// MaxPerfdata is the most perfdata items one result keeps.
	MaxPerfdata = 1000
	// MaxLabels, MaxLabelKey and MaxLabelValue bound one label set (node,
	// check, event rule and maintenance labels, selectors and matches).
	MaxLabels     = 100
	MaxLabelKey   = 128
	MaxLabelValue = 1024
	// MaxListLimit is the largest limit a list request may ask for.
	MaxListLimit = 10000
	// MaxText bounds short descriptive strings (versions, OS names, plugin
	// states) that nothing else bounds.
	MaxText = 1024
	// MaxAddress is the longest node address (a host name and a port).
	MaxAddress = 512

	// MaxResultAge is how far in the past a result's start may lie: results
	// wait in an agent's spool while its cluster is unreachable, so this is
	// the longest outage whose results are still accepted.
	MaxResultAge = 30 * 24 * time.Hour
	// MaxResultSkew is how far in the future a result's times may lie: the
	// clock difference tolerated between an agent and its cluster.
	MaxResultSkew = 10 * time.Minute
	// MaxHeartbeatRetry is the longest an agent waits between attempts to
	// heartbeat a cluster that does not answer (its backoff doubles up to
	// this): after an outage, an agent may take that long to come back, and
	// the cluster's liveness judge allows for it.
	MaxHeartbeatRetry = 30 * time.Second
)

// Labels checks one label set against MaxLabels, MaxLabelKey and
// MaxLabelValue; field is its path, such as "node.labels".
func Labels(field string, labels map[string]string) error {
	if n := len(labels); n > MaxLabels {
		return fmt.Errorf("%s: %d labels, at most %d are allowed", field, n, MaxLabels)
	}
	for k, v := range labels {
		switch {
		case k == "":
			return fmt.Errorf("%s: a label key must not be empty", field)
		case len(k) > MaxLabelKey:
			return fmt.Errorf("%s: key %q is %d bytes, at most %d are allowed", field, Abbrev(k), len(k), MaxLabelKey)
		case !utf8.ValidString(k):
			return fmt.Errorf("%s: key %q is not valid UTF-8", field, Abbrev(k))
		case len(v) > MaxLabelValue:
			return fmt.Errorf("%s[%q]: value is %d bytes, at most %d are allowed", field, k, len(v), MaxLabelValue)
		case !utf8.ValidString(v):
			return fmt.Errorf("%s[%q]: value is not valid UTF-8", field, k)
		}
	}
	return nil
}

// Text checks a free-form string against max bytes.
func Text(field, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%s: %d bytes, at most %d are allowed", field, len(s), max)
	}
	return nil
}

// ListLimit checks a list request's limit: 0 asks for the default, and
// neither a negative limit nor one above MaxListLimit is served.
func ListLimit(field string, limit int32) error {
	return Limit(field, limit, MaxListLimit)
}

// Limit checks a requested row count against max; 0 means the default.
func Limit(field string, limit int32, max int) error {
	switch {
	case limit < 0:
		return fmt.Errorf("%s: %d is negative; give 0 for the default or a count up to %d", field, limit, max)
	case int64(limit) > int64(max):
		return fmt.Errorf("%s: %d is more than the maximum of %d; narrow the request instead", field, limit, max)
	}
	return nil
}

// ResultTime checks a reported time against now: not more than MaxResultAge
// in the past, not more than MaxResultSkew in the future.
func ResultTime(field string, t, now time.Time) error {
	switch {
	case t.Before(now.Add(-MaxResultAge)):
		return fmt.Errorf("%s: %s is more than %s before the cluster's clock (%s); results older than that are not accepted",
			field, t.UTC().Format(time.RFC3339), days(MaxResultAge), now.UTC().Format(time.RFC3339))
	case t.After(now.Add(MaxResultSkew)):
		return fmt.Errorf("%s: %s is more than %s after the cluster's clock (%s); check the agent's clock",
			field, t.UTC().Format(time.RFC3339), MaxResultSkew, now.UTC().Format(time.RFC3339))
	}
	return nil
}

func days(d time.Duration) string { return strconv.Itoa(int(d/(24*time.Hour))) + " days" }

// Address checks a node address: empty (no status endpoint) or host:port,
// with a port number and nothing a URL or a header could be split on.
func Address(field, addr string) error {
	if addr == "" {
		return nil
	}
	if len(addr) > MaxAddress {
		return fmt.Errorf("%s: %d bytes, at most %d are allowed", field, len(addr), MaxAddress)
	}
	for _, r := range addr {
		if r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("/?#@\\", r) {
			return fmt.Errorf("%s: %q holds %q; want host:port, such as 10.0.0.5:7070", field, Abbrev(addr), r)
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %q is not host:port (%v); want such as 10.0.0.5:7070", field, Abbrev(addr), err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("%s: %q: port %q is not a number from 1 to 65535", field, Abbrev(addr), port)
	}
	if strings.Contains(host, "%") {
		return fmt.Errorf("%s: %q: zone identifiers are not allowed", field, Abbrev(addr))
	}
	return nil
}

// Abbrev shortens s for an error message, so a 100 MB value is named by
// its start and its size rather than repeated.
func Abbrev(s string) string {
	const keep = 64
	if len(s) <= keep {
		return s
	}
	cut := keep
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Truncate cuts s to at most max bytes at a UTF-8 boundary. cut reports
// whether anything was removed.
func Truncate(s string, max int) (out string, cut bool) {
	if len(s) <= max {
		return s, false
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// Required refuses an empty string field.
func Required(field, s string) error {
	if s == "" {
		return fmt.Errorf("%s: required", field)
	}
	return nil
}
