package eventrules_test

import (
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/eventrules"
)

// spec returns a valid spec of the given type, for tests to modify.
func spec(typ string, match *unyov1.EventMatch) *unyov1.EventRuleSpec {
	s := &unyov1.EventRuleSpec{Type: typ, Match: match, Owner: "team-infra", Reason: "INC-42"}
	switch typ {
	case "aggregate":
		s.Wait = "5m"
		s.Actions = []*unyov1.Action{createAlert(nil)}
	case "action":
		s.Actions = []*unyov1.Action{createAlert(nil)}
	}
	return s
}

func createAlert(a *unyov1.CreateAlertAction) *unyov1.Action {
	if a == nil {
		a = &unyov1.CreateAlertAction{}
	}
	return &unyov1.Action{Kind: &unyov1.Action_CreateAlert{CreateAlert: a}}
}

func deleteAlert(a *unyov1.DeleteAlertAction) *unyov1.Action {
	if a == nil {
		a = &unyov1.DeleteAlertAction{}
	}
	return &unyov1.Action{Kind: &unyov1.Action_DeleteAlert{DeleteAlert: a}}
}

func apiHook(a *unyov1.ApiHookAction) *unyov1.Action {
	return &unyov1.Action{Kind: &unyov1.Action_ApiHook{ApiHook: a}}
}

// mustCompile compiles a rule that the test expects to be valid.
func mustCompile(t testing.TB, name string, s *unyov1.EventRuleSpec) eventrules.Rule {
	t.Helper()
	r, err := eventrules.Compile(&unyov1.EventRule{Name: name, Spec: s})
	if err != nil {
		t.Fatalf("Compile(%s): %v", name, err)
	}
	return r
}

func event(node, check string, level unyov1.Level) *unyov1.Event {
	return &unyov1.Event{Node: node, Check: check, Level: level, Cluster: "tokyo"}
}

const (
	success  = unyov1.Level_LEVEL_SUCCESS
	warning  = unyov1.Level_LEVEL_WARNING
	critical = unyov1.Level_LEVEL_CRITICAL
)
