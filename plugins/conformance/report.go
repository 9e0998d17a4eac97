package conformance

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes one line per case and a summary, for people.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "CASE\tOUTCOME\tTIME\tDETAIL\n")
	for _, c := range r.Cases {
		detail := strings.ReplaceAll(c.Message, "\n", "; ")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, strings.ToUpper(string(c.Outcome)), c.Duration.Round(time.Millisecond), detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.SetupError != "" {
		fmt.Fprintf(w, "\nsetup failed: %s\n", r.SetupError)
	}
	if missing := r.MissingFixtures(); len(missing) > 0 {
		fmt.Fprintf(w, "\nfixtures that would enable skipped cases:\n")
		for _, f := range slices.Sorted(maps.Keys(missing)) {
			fmt.Fprintf(w, "  %s: %s\n", f, strings.Join(missing[f], ", "))
		}
	}
	_, err := fmt.Fprintf(w, "\n%s %s (%s): %d passed, %d failed, %d skipped in %s\n",
		r.Plugin, r.Version, strings.Join(r.Kinds, ","), r.Passed, r.Failed, r.Skipped, r.Duration.Round(time.Millisecond))
	return err
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// JUnit XML, as CI systems read it.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string          `xml:"name,attr"`
	Tests     int             `xml:"tests,attr"`
	Failures  int             `xml:"failures,attr"`
	Errors    int             `xml:"errors,attr"`
	Skipped   int             `xml:"skipped,attr"`
	Time      string          `xml:"time,attr"`
	Timestamp string          `xml:"timestamp,attr"`
	Props     []junitProperty `xml:"properties>property,omitempty"`
	Cases     []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML: one testsuite named after the
// plugin, one testcase per case; a setup failure is one errored testcase.
func (r *Report) WriteJUnit(w io.Writer) error {
	name := "unyo-plugin-conformance/" + r.Target
	s := junitSuite{Name: name, Tests: len(r.Cases), Failures: r.Failed, Skipped: r.Skipped,
		Time: secs(r.Duration), Timestamp: r.Started.UTC().Format("2006-01-02T15:04:05"),
		Props: []junitProperty{{"plugin", r.Plugin}, {"version", r.Version}, {"kinds", strings.Join(r.Kinds, ",")}}}
	for _, c := range r.Cases {
		jc := junitCase{Name: c.Name, Classname: name, Time: secs(c.Duration)}
		first, _, _ := strings.Cut(c.Message, "\n")
		switch c.Outcome {
		case Fail:
			jc.Failure = &junitMessage{Message: first, Body: c.Message}
		case Skip:
			jc.Skipped = &junitMessage{Message: c.Message}
		default:
			jc.SystemOut = c.Message
		}
		s.Cases = append(s.Cases, jc)
	}
	if r.SetupError != "" {
		s.Tests++
		s.Errors++
		s.Cases = append(s.Cases, junitCase{Name: "setup", Classname: name, Time: "0",
			Error: &junitMessage{Message: r.SetupError, Body: r.SetupError}})
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{s}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// Formats are the report formats Write accepts.
func Formats() []string { return []string{"table", "json", "junit"} }

// Write writes the report in format: table, json or junit.
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case "table", "":
		return r.WriteTable(w)
	case "json":
		return r.WriteJSON(w)
	case "junit":
		return r.WriteJUnit(w)
	}
	return fmt.Errorf("unknown report format %q: use %s", format, strings.Join(Formats(), ", "))
}

// Err summarizes a report that did not pass as an error naming the
// plugin and the failed cases; nil when it passed.
func (r *Report) Err() error {
	if r.OK() {
		return nil
	}
	if r.SetupError != "" {
		return fmt.Errorf("plugin %s: %s", r.Target, r.SetupError)
	}
	var names []string
	for _, c := range r.Cases {
		if c.Outcome == Fail {
			names = append(names, c.Name)
		}
	}
	return fmt.Errorf("plugin %s failed %d of %d cases: %s", r.Target, r.Failed, len(r.Cases), strings.Join(names, ", "))
}
