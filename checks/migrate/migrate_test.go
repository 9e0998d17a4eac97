package migrate_test

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/checks/migrate"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func read(t *testing.T, paths ...string) []migrate.File {
	t.Helper()
	var out []migrate.File
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, migrate.File{Name: filepath.Base(p), Data: b})
	}
	return out
}

// render is a translation as `unyo import` prints it: the documents, then
// the notes and node labels.
func render(t *testing.T, res migrate.Result) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := manifest.Encode(&b, res.Objects()); err != nil {
		t.Fatal(err)
	}
	b.WriteString("# notes\n")
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "# %s\n", n)
	}
	for _, h := range slices.Sorted(maps.Keys(res.NodeLabels)) {
		fmt.Fprintf(&b, "# host %s: %v\n", h, res.NodeLabels[h])
	}
	return b.Bytes()
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it); got:\n%s", path, got)
	}
}

// valid fails when the server would refuse a translated check.
func valid(t *testing.T, res migrate.Result) {
	t.Helper()
	if err := builtin.Kinds().Validate(res.Objects(), time.Now()); err != nil {
		t.Errorf("translated checks are refused: %v", err)
	}
}

// TestNagios: templates (first listed wins), hostgroups with members,
// host hostgroups and nested groups, $ARGn$ (\! kept), $USERn$ from a
// resource file, host macros (one check per host), check_interval in
// interval_length units, max_check_attempts, freshness, exclusions and
// macros without a value noted.
func TestNagios(t *testing.T) {
	res := migrate.Nagios(read(t, "testdata/objects.cfg", "testdata/resource.cfg"), migrate.NagiosOptions{})
	valid(t, res)
	golden(t, "objects.golden", render(t, res))
}

func TestNagiosIntervalLength(t *testing.T) {
	res := migrate.Nagios(read(t, "testdata/objects.cfg"), migrate.NagiosOptions{IntervalLength: 10 * time.Second})
	for _, c := range res.Checks {
		if c.GetName() == "load-average" && c.GetSpec().GetInterval() != "5s" {
			t.Errorf("check_interval 0.5 × interval_length 10s = %s, want 5s", c.GetSpec().GetInterval())
		}
		if c.GetName() == "http-web1" && c.GetSpec().GetCommand()[0] != "/usr/lib/nagios/plugins/check_http" {
			t.Errorf("$USER1$ without a resource file = %q, want Debian's plugin directory", c.GetSpec().GetCommand()[0])
		}
	}
}

func TestSensu(t *testing.T) {
	res := migrate.Sensu(read(t, "testdata/sensu-checks.yaml", "testdata/sensu-checks.json"))
	valid(t, res)
	golden(t, "sensu.golden", render(t, res))
}

func TestSensuUnreadable(t *testing.T) {
	res := migrate.Sensu([]migrate.File{{Name: "bad.yaml", Data: []byte("a: [")}})
	if len(res.Checks) != 0 || len(res.Notes) != 1 || !strings.Contains(res.Notes[0].String(), "bad.yaml: not read") {
		t.Errorf("unreadable file: %v", res)
	}
}

// TestNagiosDebianExamples translates the example configuration Debian's
// nagios4-common installs, through its nagios.cfg, as an operator would.
func TestNagiosDebianExamples(t *testing.T) {
	const mainCfg = "/etc/nagios4/nagios.cfg"
	testutil.NeedTool(t, "nagios4's example configuration", "apt-get install -y nagios4-common", mainCfg)
	b, err := os.ReadFile(mainCfg)
	if err != nil {
		t.Fatal(err)
	}
	main, ok := migrate.ParseNagiosMain(b)
	if !ok || main.IntervalLength != time.Minute {
		t.Fatalf("nagios.cfg: %+v, %v", main, ok)
	}
	var files []migrate.File
	for _, p := range main.CfgFiles {
		files = append(files, read(t, p)...)
	}
	res := migrate.Nagios(files, migrate.NagiosOptions{IntervalLength: main.IntervalLength})
	valid(t, res)
	got := map[string]string{}
	for _, c := range res.Checks {
		got[c.GetName()] = fmt.Sprintf("%s every %s, %d occurrences, %v", strings.Join(c.GetSpec().GetCommand(), " "),
			c.GetSpec().GetInterval(), c.GetSpec().GetOccurrences(), c.GetSpec().GetNodeSelector())
	}
	for name, want := range map[string]string{
		"current-load":    "/usr/lib/nagios/plugins/check_load -w 5.0,4.0,3.0 -c 10.0,6.0,4.0 every 5m0s, 4 occurrences, map[nagios.host/localhost:true]",
		"root-partition":  "/usr/lib/nagios/plugins/check_disk -w 20% -c 10% -p / every 5m0s, 4 occurrences, map[nagios.host/localhost:true]",
		"total-processes": "/usr/lib/nagios/plugins/check_procs -w 250 -c 400 -s RSZDT every 5m0s, 4 occurrences, map[nagios.host/localhost:true]",
	} {
		if got[name] != want {
			t.Errorf("%s = %q, want %q", name, got[name], want)
		}
	}
	// The example's PING, SSH and HTTP use commands Debian ships in
	// monitoring-plugins' files (cfg_dir), not given here: noted.
	var text []string
	for _, n := range res.Notes {
		text = append(text, n.String())
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{`check_command "check_ping" is not defined`, "retry_interval 1", "host checks (check_command of localhost)"} {
		if !strings.Contains(all, want) {
			t.Errorf("notes lack %q:\n%s", want, all)
		}
	}
	if labels := res.NodeLabels["localhost"]; labels["nagios.hostgroup/linux-servers"] != "true" {
		t.Errorf("localhost's node labels %v lack its hostgroup linux-servers", labels)
	}
}
