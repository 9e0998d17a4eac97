package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeExample: the authoring example in plugins/README.md is the
// file the test builds, takes at most 40 lines, and passes conformance
// under the public Build helper.
func TestReadmeExample(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "unyo-check-fileage", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Errorf("plugins/README.md does not show testdata/unyo-check-fileage/main.go as it is")
	}
	if n := strings.Count(string(src), "\n"); n > 40 {
		t.Errorf("the example takes %d lines, want at most 40", n)
	}
	path := Build(t, "./testdata/unyo-check-fileage", "unyo-check-fileage")
	rep := RunWith(t, Binary(path, fixtures(t, "check-fileage")), Options{})
	if rep.Passed == 0 {
		t.Errorf("no case passed: %+v", rep)
	}
}
