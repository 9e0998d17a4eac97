package server

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Every procedure of the API is classified on purpose; one missing from the
// table would need the admin role, which is safe but rarely meant.
func TestEveryProcedureIsClassified(t *testing.T) {
	services := unyov1.File_unyo_v1_unyo_proto.Services()
	for i := range services.Len() {
		svc := services.Get(i)
		methods := svc.Methods()
		for j := range methods.Len() {
			p := "/" + string(svc.FullName()) + "/" + string(methods.Get(j).Name())
			if _, ok := procedures[p]; !ok {
				t.Errorf("procedure %s is not in the access table (policy.go)", p)
			}
		}
	}
}

func TestAuthorizeMatrix(t *testing.T) {
	users := func(r Role) Principal { return Principal{Kind: KindUser, Name: "u", Role: r} }
	principals := map[string]Principal{
		"viewer":    users(RoleViewer),
		"operator":  users(RoleOperator),
		"admin":     users(RoleAdmin),
		"node":      {Kind: KindNode, Name: "web1"},
		"cluster":   {Kind: KindCluster, Name: "eu"},
		"root":      {Kind: KindRoot, Name: "root"},
		"join":      {Kind: KindJoin, Name: "j"},
		"anonymous": Anonymous(""),
	}
	// Who may call a procedure of each access class.
	allowed := map[Access]string{
		AccessRead:            "viewer operator admin root anonymous",
		AccessOperate:         "operator admin root anonymous",
		AccessWrite:           "operator admin root anonymous",
		AccessAdmin:           "admin root anonymous",
		AccessAgent:           "node admin anonymous",
		AccessEnrol:           "join node admin anonymous",
		AccessClusterRegister: "cluster admin anonymous",
		AccessAnyone:          "viewer operator admin node cluster root join anonymous",
	}
	a := &Auth{}
	for acc, who := range allowed {
		proc := "/test/Access" + string(rune('A'+int(acc)))
		a.ClassifyProcedure(proc, acc)
		for name, p := range principals {
			err := a.authorize(proc, p)
			want := strings.Contains(" "+who+" ", " "+name+" ")
			if (err == nil) != want {
				t.Errorf("access %d, %s: allowed=%v, want %v (%v)", acc, name, err == nil, want, err)
			}
			if err != nil && connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Errorf("access %d, %s: code %v", acc, name, connect.CodeOf(err))
			}
		}
	}
	if err := a.authorize("/unyo.v1.Unknown/Call", users(RoleOperator)); err == nil {
		t.Error("an unclassified procedure was open to an operator")
	}
}
