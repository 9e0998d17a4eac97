package root

import (
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
)

// Unit tests of root's pure parts: how fanned-out answers are merged and
// reported, and how requests are checked before they fan out. The
// end-to-end behaviour is in root_test.go.

func TestSplit(t *testing.T) {
	answers := []answer[int]{
		{cluster: "a", value: 1},
		{cluster: "b", url: "https://b:8443", err: connect.NewError(connect.CodeUnavailable, errors.New("connection refused"))},
		{cluster: "c", value: 3},
		{cluster: "d", err: connect.NewError(connect.CodeNotFound, errors.New(`check "x" not found`))},
	}
	ok, errs := split(answers)
	if len(ok) != 2 || ok[0].value != 1 || ok[1].value != 3 {
		t.Errorf("answers = %+v, want a and c", ok)
	}
	if len(errs) != 2 || errs[0].GetCluster() != "b" || errs[1].GetCluster() != "d" {
		t.Fatalf("cluster errors = %v, want b and d", errs)
	}
	// An unreachable cluster is explained with its address; other errors
	// keep the cluster's own message.
	if e := errs[0].GetError(); !strings.Contains(e, "https://b:8443") || !strings.Contains(e, "connection refused") {
		t.Errorf("b's error = %q, want its address and cause", e)
	}
	if e := errs[1].GetError(); e != `check "x" not found` {
		t.Errorf("d's error = %q", e)
	}
}

func TestRefusedByAll(t *testing.T) {
	invalid := connect.NewError(connect.CodeInvalidArgument, errors.New("bad selector"))
	large := connect.NewError(connect.CodeResourceExhausted, errors.New("too many series"))
	down := connect.NewError(connect.CodeUnavailable, errors.New("down"))
	for _, tc := range []struct {
		name     string
		answers  []answer[int]
		wantCode connect.Code // 0: no refusal
	}{
		{"no clusters", nil, 0},
		{"all refuse", []answer[int]{{cluster: "a", err: invalid}, {cluster: "b", err: large}}, connect.CodeInvalidArgument},
		{"one answers", []answer[int]{{cluster: "a", err: invalid}, {cluster: "b", value: 1}}, 0},
		{"one is down", []answer[int]{{cluster: "a", err: invalid}, {cluster: "b", err: down}}, 0},
		{"all too large", []answer[int]{{cluster: "a", err: large}}, connect.CodeResourceExhausted},
	} {
		err := refusedByAll(tc.answers)
		if got := connect.CodeOf(err); (err == nil) != (tc.wantCode == 0) || (err != nil && got != tc.wantCode) {
			t.Errorf("%s: %v (code %v), want code %v", tc.name, err, got, tc.wantCode)
		}
		if err != nil && !strings.Contains(err.Error(), "cluster a: ") {
			t.Errorf("%s: %v does not name the first cluster", tc.name, err)
		}
	}
}

func TestLabelled(t *testing.T) {
	series := []*unyov1.Series{{}, {Labels: map[string]string{"__name__": "up", "cluster": "spoofed"}}}
	for _, s := range labelled(series, "eu") {
		if s.GetLabels()["cluster"] != "eu" {
			t.Errorf("labels = %v, want cluster=eu", s.GetLabels())
		}
	}
	if series[1].GetLabels()["__name__"] != "up" {
		t.Errorf("other labels lost: %v", series[1].GetLabels())
	}
}

func TestWithClusterLeavesTheRequestAlone(t *testing.T) {
	in := []*unyov1.Object{{Kind: &unyov1.Object_Check{Check: &unyov1.Check{Name: "disk"}}}}
	out := withCluster(in, "eu")
	if got := out[0].GetCheck().GetCluster(); got != "eu" {
		t.Errorf("cluster = %q, want eu", got)
	}
	if got := in[0].GetCheck().GetCluster(); got != "" {
		t.Errorf("the request's object was changed: cluster %q", got)
	}
}

func TestValidRef(t *testing.T) {
	for _, tc := range []struct {
		ref     *unyov1.ObjectRef
		wantErr string
	}{
		{&unyov1.ObjectRef{Kind: "check", Name: "disk"}, ""},
		{&unyov1.ObjectRef{Kind: "Checks", Name: "disk"}, ""},
		{&unyov1.ObjectRef{Name: "disk"}, "refs[0].kind: required"},
		{&unyov1.ObjectRef{Kind: "gadget", Name: "disk"}, "refs[0].kind: "},
		{&unyov1.ObjectRef{Kind: "check"}, "refs[0].name: required"},
		{nil, "refs[0].kind: required"},
	} {
		_, err := refKind(builtin.Kinds(), "refs[0]", tc.ref)
		err = invalid(err)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.ref, err)
			}
			continue
		}
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: %v, want InvalidArgument with %q", tc.ref, err, tc.wantErr)
		}
	}
}

func TestInvalidTakesTheFirstError(t *testing.T) {
	if err := invalid(nil, nil); err != nil {
		t.Errorf("invalid(nil, nil) = %v", err)
	}
	err := invalid(nil, errors.New("first"), errors.New("second"))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "first") {
		t.Errorf("invalid = %v, want InvalidArgument: first", err)
	}
}

func TestMessage(t *testing.T) {
	if got := message(connect.NewError(connect.CodePermissionDenied, errors.New("no write on checks"))); got != "no write on checks" {
		t.Errorf("message(connect error) = %q, want the message without the code", got)
	}
	if got := message(errors.New("plain")); got != "plain" {
		t.Errorf("message(plain) = %q", got)
	}
}
