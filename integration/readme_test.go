package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/unyo-ops/unyo/core/testutil"
)

// readmeBlocks returns the ```sh blocks of the README section that starts
// with heading.
func readmeBlocks(t *testing.T, heading string) []string {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	s = s[i+len(heading)+2:]
	if j := strings.Index(s, "\n### "); j >= 0 {
		s = s[:j]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(s, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// copyCheckout copies the files git knows of (tracked, or new and not
// ignored) to dir, as a fresh clone of this working tree would have them.
func copyCheckout(t *testing.T, dir string) {
	t.Helper()
	out, err := exec.Command("git", "-C", "..", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("list the checkout's files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join("..", f)
		fi, err := os.Lstat(src)
		if err != nil {
			continue // deleted in the working tree
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// The README's "Separate processes, PostgreSQL" section, run exactly as
// written in a copy of the checkout: build, a PostgreSQL of its own, root,
// a cluster and an agent as separate processes. It must end where `unyo dev`
// starts: this machine's node Ready in cluster "local", the example checks
// and default rules applied, results arriving; then the section's stop
// commands leave nothing running and no database behind.
func TestReadmeSeparateProcesses(t *testing.T) {
	t.Parallel() // its fixed ports (7400-7402, 5433) are below the ones freeAddr hands out
	for _, tool := range []string{"make", "go", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run the README's commands: %v", tool, err)
		}
	}
	blocks := readmeBlocks(t, "### Separate processes, PostgreSQL")
	if len(blocks) != 2 {
		t.Fatalf("the section has %d sh blocks, want 2 (start, stop)", len(blocks))
	}
	dir := t.TempDir()
	copyCheckout(t, dir)
	gate := filepath.Join(dir, ".test-go-on")
	// Between the two blocks the test looks at what the first one built.
	script := blocks[0] + "\necho ===READY===\nwhile [ ! -e " + gate + " ]; do sleep 0.2; done\n" + blocks[1] + "\necho ===STOPPED===\n"

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir = dir
	// With -trimpath the copy's build reuses TestMain's cached packages
	// instead of compiling everything again under another path.
	cmd.Env = append(os.Environ(), "GOFLAGS=-trimpath")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var log strings.Builder
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever happened, nothing of the section outlives the test.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		stop := exec.Command("configs/local-postgres.sh", "stop")
		stop.Dir = dir
		if out, err := stop.CombinedOutput(); err != nil {
			t.Errorf("stop the README's PostgreSQL: %v: %s", err, out)
		}
		if t.Failed() {
			for _, f := range []string{"root", "cluster", "agent"} {
				data, _ := os.ReadFile(filepath.Join(dir, ".unyo-data", f+".log"))
				if len(data) > 8000 {
					data = data[len(data)-8000:]
				}
				t.Logf("---- %s.log (tail) ----\n%s", f, data)
			}
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	waitFor := func(marker string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the section's commands ended before %s:\n%s", marker, log.String())
				}
				log.WriteString(l + "\n")
				if l == marker {
					return
				}
			case <-ctx.Done():
				t.Fatalf("the section's commands did not reach %s in time:\n%s", marker, log.String())
			}
		}
	}
	waitFor("===READY===")
	out := log.String()
	for _, want := range []string{"postgres://unyo@127.0.0.1:5433/unyo", "Check/load (local) created", "Ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("the section's output lacks %q:\n%s", want, out)
		}
	}

	// What `unyo dev` starts with: the example checks, and the default rules
	// the cluster started with.
	const server = "http://127.0.0.1:7400"
	wantNames := func(file, kind string) []string {
		f, err := os.Open(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var names []string
		for dec := yaml.NewDecoder(f); ; {
			var doc struct{ Kind, Name string }
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if doc.Kind == kind {
				names = append(names, doc.Name)
			}
		}
		slices.Sort(names)
		return names
	}
	for _, tc := range []struct{ noun, file, kind string }{
		{"checks", "configs/resources/checks.yaml", "Check"},
		{"rules", "configs/resources/rules.yaml", "EventRule"},
	} {
		items, err := cliJSON(t, server, tc.noun, "ls")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range items {
			got = append(got, fmt.Sprint(it["name"]))
		}
		slices.Sort(got)
		if want := wantNames(tc.file, tc.kind); !slices.Equal(got, want) {
			t.Errorf("%s ls = %v, want %v (from %s)", tc.noun, got, want, tc.file)
		}
	}
	testutil.Eventually(t, 2*time.Minute, "results of the example checks from this machine", func() error {
		items, err := cliJSON(t, server, "events", "ls", "--check", "unyo-data-writable")
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return fmt.Errorf("no result yet")
		}
		return nil
	})

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor("===STOPPED===")
	if err := <-done; err != nil {
		t.Fatalf("the section's commands failed: %v\n%s", err, log.String())
	}
	if _, err := os.Stat(filepath.Join(dir, ".unyo-pg.dir")); !os.IsNotExist(err) {
		t.Errorf("the stop commands left the PostgreSQL pointer behind (%v)", err)
	}
	if _, err := cli(t, server, "status"); err == nil {
		t.Errorf("root still answers after the stop commands")
	}
}
