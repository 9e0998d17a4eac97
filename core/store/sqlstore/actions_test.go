package sqlstore

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/store"
	"github.com/unyo-ops/unyo/eventrules/pipeline"
)

// TestActionsOutboxPlugin: an outbox job keeps its action plugin (name and
// params) next to api_hook jobs, which keep none, and the body the commit
// built from its payload.
func TestActionsOutboxPlugin(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, open func(ctx context.Context) (*Store, error)) {
		s, err := open(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		params, _ := structpb.NewStruct(map[string]any{"args": []any{"a", "b"}})
		plugin := &unyov1.PluginAction{Name: "exec", Config: params}
		ev := []*unyov1.Event{{Id: "e1", Node: "web1", Check: "disk", Level: unyov1.Level_LEVEL_CRITICAL}}
		if err := s.CommitPipeline(t.Context(), &store.PipelineCommit{Decision: pipeline.Decision{Actions: []pipeline.ActionJob{
			{Key: "r/e1/0", Rule: "r", EventID: "e1", Hook: &unyov1.ApiHookAction{Url: "http://x"}, Events: ev},
			{Key: "r/e1/1", Rule: "r", EventID: "e1", Plugin: plugin, Events: ev},
			{Key: "r/e1/2", Rule: "r", EventID: "e1", Plugin: &unyov1.PluginAction{Name: "bare"}, Events: ev},
		}}}); err != nil {
			t.Fatal(err)
		}
		due, err := s.DueActions(t.Context(), 10)
		if err != nil {
			t.Fatal(err)
		}
		byKey := map[string]store.PendingAction{}
		for _, j := range due {
			byKey[j.Key] = j
		}
		if j := byKey["r/e1/0"]; j.Plugin != nil || j.Hook.GetUrl() != "http://x" || !strings.Contains(string(j.Body), `"key":"r/e1/0"`) {
			t.Errorf("api_hook job: %+v", j)
		}
		if j := byKey["r/e1/1"]; !proto.Equal(j.Plugin, plugin) || !strings.Contains(string(j.Body), `"key":"r/e1/1"`) {
			t.Errorf("plugin job: %+v", j)
		}
		if j := byKey["r/e1/2"]; j.Plugin.GetName() != "bare" {
			t.Errorf("plugin job without params: %+v", j)
		}
		if err := s.FinishAction(t.Context(), "r/e1/1", nil); err != nil {
			t.Fatal(err)
		}
		if due, err = s.DueActions(t.Context(), 10); err != nil || len(due) != 2 {
			t.Errorf("after FinishAction: %d jobs, %v", len(due), err)
		}
	})
}
