package kinds

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestNewRefuses(t *testing.T) {
	check := Define(Spec[*unyov1.Check]{Owner: ClusterTier})
	tests := []struct {
		name string
		ks   []Kind
		want string
	}{
		{"a message outside Object's oneof", []Kind{Define(Spec[*unyov1.Node]{Owner: ClusterTier})}, "Node is not a member of unyo.v1.Object's oneof"},
		{"no owner", []Kind{Define(Spec[*unyov1.Check]{})}, `owner "" is neither root nor cluster`},
		{"a spelling twice", []Kind{check, Define(Spec[*unyov1.EventRule]{Owner: ClusterTier, Aliases: []string{"checks"}})}, `Check and EventRule are both spelled "checks"`},
		{"a kind twice", []Kind{check, check}, `Check and Check are both spelled "check"`},
		{"a count that is no int64 field", []Kind{Define(Spec[*unyov1.Check]{Owner: ClusterTier, Count: "source"})}, `count field "source"`},
		{"not built with Define", []Kind{{Name: "Check"}}, "not built with Define"},
	}
	for _, tt := range tests {
		_, err := New(tt.ks...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New = %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}

func TestObjectHelpers(t *testing.T) {
	o := Wrap(&unyov1.Check{Name: "disk", Cluster: "dc1"})
	if got := Ref(o); !proto.Equal(got, &unyov1.ObjectRef{Kind: "Check", Name: "disk", Cluster: "dc1"}) {
		t.Errorf("Ref = %v", got)
	}
	SetCluster(o, "dc2")
	if Cluster(o) != "dc2" {
		t.Errorf("SetCluster: cluster %q", Cluster(o))
	}
	for _, empty := range []*unyov1.Object{{}, nil} {
		SetCluster(empty, "x") // no kind: nothing to set, no panic
		if KindOf(empty) != "" || Name(empty) != "" || Cluster(empty) != "" || Ref(empty).GetKind() != "" || Message(empty) != nil {
			t.Errorf("helpers on an object without kind: %v", empty)
		}
	}
	if Wrap(&unyov1.Node{}) != nil {
		t.Error("Wrap of a message outside the oneof returned an object")
	}
	if _, _, ok := NewObject("Node"); ok {
		t.Error("NewObject(Node) succeeded")
	}
	if o, m, ok := NewObject("Maintenance"); !ok || KindOf(o) != "Maintenance" || Message(o) != m {
		t.Errorf("NewObject(Maintenance) = %v, %v, %v", o, m, ok)
	}
	// A registry need not hold every kind; what it lacks is unknown to it.
	r, err := New(Define(Spec[*unyov1.Check]{Owner: ClusterTier}))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := r.Of(Wrap(&unyov1.EventRule{Name: "r"})); ok {
		t.Error("a registry without EventRule knows one")
	}
	if err := r.Validate([]*unyov1.Object{Wrap(&unyov1.EventRule{Name: "r"})}, time.Time{}); err == nil {
		t.Error("Validate accepted a kind the registry lacks")
	}
}
