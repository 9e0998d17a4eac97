package main

import (
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestUndoTargetAndRolloutLine(t *testing.T) {
	st := &unyov1.RegionServiceStatus{TemplateRevision: 3, History: []*unyov1.TemplateRevision{{Revision: 1}, {Revision: 2}, {Revision: 3}}}
	for _, tc := range []struct {
		to      int64
		want    int64
		wantErr string
	}{
		{0, 2, ""}, {1, 1, ""}, {7, 0, "revision 7 is not in its history (kept: 1, 2, 3)"},
	} {
		h, err := undoTarget(st, tc.to)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("to %d: %v, want %q", tc.to, err, tc.wantErr)
			}
			continue
		}
		if err != nil || h.GetRevision() != tc.want {
			t.Errorf("to %d: %v, %v; want revision %d", tc.to, h, err, tc.want)
		}
	}
	if _, err := undoTarget(&unyov1.RegionServiceStatus{TemplateRevision: 1, History: []*unyov1.TemplateRevision{{Revision: 1}}}, 0); err == nil {
		t.Error("undo with one revision")
	}
	s := &unyov1.RegionService{Name: "web", Revision: 4, Status: &unyov1.RegionServiceStatus{Phase: "Updating", TemplateRevision: 2, Replicas: 3, Updated: 2,
		Rollout: "2/3 replicas updated, 1 being replaced", ObservedRevision: 4}}
	line, done, failed := rolloutLine(s)
	if line != "service web, revision 2: 2/3 replicas updated, 1 being replaced (Updating)" || done || failed {
		t.Errorf("rolling: %q %v %v", line, done, failed)
	}
	s.Status = &unyov1.RegionServiceStatus{Phase: "Active", TemplateRevision: 2, Replicas: 3, Updated: 3, ObservedRevision: 4}
	if line, done, _ := rolloutLine(s); !done || !strings.Contains(line, "3/3 replicas updated (Active)") {
		t.Errorf("done: %q %v", line, done)
	}
	s.Status = &unyov1.RegionServiceStatus{Phase: "Failed", Message: "web-1: ProviderError", ObservedRevision: 4}
	if _, _, failed := rolloutLine(s); !failed {
		t.Error("a Failed service's rollout is not failed")
	}
}
