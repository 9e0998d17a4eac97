package root

import (
	"flag"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/validate"
	"github.com/unyo-ops/unyo/core/apifuzz"
)

var writeSeeds = flag.Bool("write-seeds", false, "rewrite the fuzz seed corpus under testdata/fuzz")

// FuzzRootAPI sends random and mutated requests to every RPC method of a
// root with one real cluster behind it: each must succeed or be refused
// with a specific code, and nothing may panic, in root's fan-out goroutines
// or in the cluster they reach.
func FuzzRootAPI(f *testing.F) {
	watch := &apifuzz.PanicWatch{}
	// A short cluster timeout: fuzzed registrations point at closed ports.
	rc := startRoot(f, Options{Logger: slog.New(watch), ClusterTimeout: 2 * time.Second})
	methods := apifuzz.Methods(rc)
	if *writeSeeds {
		if err := apifuzz.WriteSeeds(filepath.Join("testdata", "fuzz", "FuzzRootAPI"), methods); err != nil {
			f.Fatal(err)
		}
	}
	for _, m := range methods {
		f.Add(m.Procedure, m.SeedBytes())
	}
	f.Fuzz(func(t *testing.T, procedure string, payload []byte) {
		m := apifuzz.Pick(methods, procedure)
		if m.Procedure == "ClusterService/RegisterCluster" {
			// A registration root accepts would stay (no API removes a
			// cluster yet) and every later fan-out would ask it, or move
			// the real cluster away: only refusals are fuzzed.
			var req unyov1.RegisterClusterRequest
			if err := proto.Unmarshal(payload, &req); err == nil && validate.Name(req.GetName()) == nil && strings.HasPrefix(req.GetUrl(), "http") {
				t.Skip("would register a cluster")
			}
		}
		if err := apifuzz.Call(m, payload); err != nil {
			t.Fatal(err)
		}
		if p := watch.Take(); len(p) > 0 {
			t.Fatalf("root or its cluster logged a panic: %v", p)
		}
	})
}
