package nagios

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/corpus/*.golden.json from the current parser")

const corpusDir = "testdata/corpus"

// golden is what a corpus case is expected to parse to, in a form meant for
// review by eye: thresholds carry their meaning, values their base unit.
type golden struct {
	Command  string       `json:"command"`
	Exit     int          `json:"exit"`
	Status   string       `json:"status"`
	Text     string       `json:"text"`
	LongText string       `json:"long_text,omitempty"`
	Perfdata []goldenPerf `json:"perfdata,omitempty"`
	Errors   []string     `json:"errors,omitempty"`
}

type goldenPerf struct {
	Label string `json:"label"`
	Value string `json:"value"`
	UOM   string `json:"uom,omitempty"`
	Base  string `json:"base"`
	Warn  string `json:"warn,omitempty"`
	Crit  string `json:"crit,omitempty"`
	Min   string `json:"min,omitempty"`
	Max   string `json:"max,omitempty"`
	// State is the value judged against Warn and Crit by Range.Alerts.
	State string `json:"state"`
}

// caseMeta reads NAME.meta: "command: ..." and "exit: N" lines.
func caseMeta(t *testing.T, path string) (command string, exit int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	exit = -1
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		switch k {
		case "command":
			command = v
		case "exit":
			if exit, err = strconv.Atoi(v); err != nil {
				t.Fatalf("%s: bad exit line: %v", path, err)
			}
		}
	}
	if command == "" || exit < 0 {
		t.Fatalf("%s: needs a command: and an exit: line", path)
	}
	return command, exit
}

func num(f float64) string {
	if math.IsNaN(f) {
		return "NaN"
	}
	return formatNumber(f)
}

// meaning spells out when a range alerts, from its fields rather than from
// Alerts, so that the goldens show what the parse means.
func meaning(r Range) string {
	lo, hi := num(r.Start), num(r.End)
	if r.Inside {
		switch {
		case r.StartInf && r.EndInf:
			return "always alerts"
		case r.StartInf:
			return "alert if <= " + hi
		case r.EndInf:
			return "alert if >= " + lo
		}
		return "alert if >= " + lo + " and <= " + hi
	}
	switch {
	case r.StartInf && r.EndInf:
		return "never alerts"
	case r.StartInf:
		return "alert if > " + hi
	case r.EndInf:
		return "alert if < " + lo
	}
	return "alert if < " + lo + " or > " + hi
}

func threshold(text string, r *Range) string {
	switch {
	case text == "":
		return ""
	case r == nil:
		return text + " => not parsed"
	}
	return text + " => " + meaning(*r)
}

func toGolden(command string, exit int, o Output) golden {
	g := golden{
		Command:  command,
		Exit:     exit,
		Status:   StatusFromExit(exit).String(),
		Text:     o.Text,
		LongText: o.LongText,
		Errors:   o.Errors,
	}
	for _, p := range o.Perfdata {
		bv, bu := p.BaseValue()
		gp := goldenPerf{
			Label: p.Label,
			Value: num(p.Value),
			UOM:   p.UOM,
			Base:  strings.TrimSpace(num(bv) + " " + bu),
			Warn:  threshold(p.WarnText, p.Warn),
			Crit:  threshold(p.CritText, p.Crit),
			State: OK.String(),
		}
		if p.Min != nil {
			gp.Min = num(*p.Min)
		}
		if p.Max != nil {
			gp.Max = num(*p.Max)
		}
		switch {
		case p.Crit != nil && p.Crit.Alerts(p.Value):
			gp.State = Critical.String()
		case p.Warn != nil && p.Warn.Alerts(p.Value):
			gp.State = Warning.String()
		}
		g.Perfdata = append(g.Perfdata, gp)
	}
	return g
}

func encodeGolden(t *testing.T, g golden) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(g); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func corpusCases(t testing.TB) []string {
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("empty corpus")
	}
	for i, f := range files {
		files[i] = strings.TrimSuffix(f, ".txt")
	}
	return files
}

// TestCorpus parses every case of testdata/corpus and compares the result
// with its golden file.
func TestCorpus(t *testing.T) {
	cases := corpusCases(t)
	for _, base := range cases {
		name := filepath.Base(base)
		t.Run(name, func(t *testing.T) {
			out, err := os.ReadFile(base + ".txt")
			if err != nil {
				t.Fatal(err)
			}
			command, exit := caseMeta(t, base+".meta")
			o := Parse(string(out))
			got := encodeGolden(t, toGolden(command, exit, o))

			if !strings.HasPrefix(name, "hand_") && !strings.HasSuffix(name, "_usage") && len(o.Errors) > 0 {
				// Real plugins follow the guidelines; an error here is a
				// parser bug, not bad input. Usage texts are the exception:
				// they contain '|' ("[-4|-6]"), after which the guidelines
				// (and Nagios) read everything as perfdata.
				t.Errorf("real plugin output gave errors: %q", o.Errors)
			}

			path := base + ".golden.json"
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("parse differs from %s\n--- got:\n%s\n--- want:\n%s", path, got, want)
			}
		})
	}

	// Every golden and sidecar must belong to a case, so none goes stale.
	known := map[string]bool{}
	for _, c := range cases {
		known[c] = true
	}
	for _, ext := range []string{".golden.json", ".meta", ".stderr"} {
		files, _ := filepath.Glob(filepath.Join(corpusDir, "*"+ext))
		for _, f := range files {
			if !known[strings.TrimSuffix(f, ext)] {
				t.Errorf("%s has no matching .txt case", f)
			}
		}
	}
}
