package manifest

import (
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestAliasBombIsRefusedInBoundedMemory: a 1 KB file whose aliases expand
// to 387 million strings is refused, naming the document and the limit,
// after allocating little.
func TestAliasBombIsRefusedInBoundedMemory(t *testing.T) {
	f, err := os.Open("testdata/alias_bomb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = Decode(f, "bomb.yaml")
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), `bomb.yaml: document 1, Check "bomb": expands to more than 200000 values`) {
		t.Fatalf("err = %v, want the document and the limit named", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("decoding allocated %d MiB, want under 64 MiB", grew>>20)
	}
	if n := strings.Count(err.Error(), "\n"); n > 0 {
		t.Errorf("want one error for the document, got %d lines:\n%s", n+1, err)
	}
}

// TestAliasesWithinTheLimitsStillWork: sharing a value by alias is fine.
func TestAliasesWithinTheLimitsStillWork(t *testing.T) {
	doc := `kind: Check
name: shared
labels: &l {team: ops}
spec:
  interval: 10s
  plugin: {name: tcp, target: {address: "db:5432", tags: &t [a, b], more: [*t, *t], labels: *l}}
`
	objs, err := Decode(strings.NewReader(doc), "ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := objs[0].GetCheck().GetSpec().GetPlugin().GetTarget().GetFields()["more"].GetListValue().GetValues(); len(got) != 2 {
		t.Fatalf("more = %v", got)
	}
}

func TestOversizedInputIsRefused(t *testing.T) {
	tests := []struct {
		name string
		in   io.Reader
		want string
	}{
		{"file", io.LimitReader(spaces{}, MaxFileSize+10), "big.yaml: larger than 64 MiB, the most one apply reads"},
		{"document", strings.NewReader("kind: Check\nname: a\nspec: {command: [\"true\"], interval: 10s}\n---\nkind: Check\nname: b\nlabels: {x: \"" + strings.Repeat("x", MaxDocumentSize) + "\"}\n"),
			"big.yaml: document 2 (line 4): 4194344 bytes, more than 4 MiB, the largest document read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.in, "big.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %.300v, want %q", err, tt.want)
			}
		})
	}
}

// spaces is an endless stream of blank lines.
type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '\n'
	}
	return len(p), nil
}
