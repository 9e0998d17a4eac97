package service_test

import (
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/manifest"
)

// TestExampleService: configs/examples/service.yaml decodes and every
// object in it is valid, its service of three replicas on provider exec.
func TestExampleService(t *testing.T) {
	objs, err := manifest.DecodeFile("../../configs/examples/service.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := builtin.Kinds().Validate(objs, time.Now()); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, o := range objs {
		if s := o.GetRegionService(); s != nil {
			found = true
			if c := s.GetSpec().GetCompute(); c.GetReplicas() != 3 || c.GetProvider() != "exec" {
				t.Errorf("the example service has %d replicas on %q, want 3 on exec", c.GetReplicas(), c.GetProvider())
			}
		}
	}
	if !found {
		t.Error("the example has no RegionService")
	}
}
