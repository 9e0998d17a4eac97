package integration

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// callerMay says, independently of the server's access table, which
// callers may call each procedure at all (what they may then do with it,
// such as which node a node reports for, is tested elsewhere). Every
// procedure of the API must be listed: a new one fails this test until it
// is classified here too.
var callerMay = map[string]string{
	"AgentService/Register":         "join node admin",
	"AgentService/Heartbeat":        "node admin",
	"AgentService/ReportResults":    "node admin",
	"AgentService/GetChecks":        "node admin",
	"AgentService/RenewCertificate": "node admin",
	"MetricsService/WriteMetrics":   "node admin",
	"LogsService/WriteLogs":         "node admin",

	"ClusterService/RegisterCluster": "admin", // and the cluster's own credential
	"ClusterService/AddCluster":      "admin",
	"ClusterService/DeleteCluster":   "admin",
	"NodeService/DeleteNode":         "admin",
	"NodeService/SetNodeTopology":    "admin", // and root's credential at a cluster
	"NodeService/CordonNode":         "operator admin",
	"NodeService/DrainNode":          "operator admin",
	"NodeService/SetNodeAuto":        "operator admin",
	"TokenService/CreateToken":       "admin",
	"TokenService/ListTokens":        "admin",
	"TokenService/RevokeToken":       "admin",
	"AuditService/ListAudit":         "admin",

	"ObjectService/Apply":               "operator admin", // the kind decides further
	"ObjectService/Delete":              "operator admin",
	"AlertService/AckAlert":             "operator admin",
	"AlertService/CloseAlert":           "operator admin",
	"MaintenanceService/EndMaintenance": "operator admin",
	"NetworkService/AllocateAddress":    "operator admin",
	"NetworkService/ReleaseAddress":     "operator admin",

	"StatusService/GetStatus": "join node viewer operator admin",

	"ObjectService/Get":           "viewer operator admin",
	"ObjectService/List":          "viewer operator admin",
	"NodeService/ListNodes":       "viewer operator admin",
	"NodeService/GetNode":         "viewer operator admin",
	"EventService/ListEvents":     "viewer operator admin",
	"EventService/GetEvent":       "viewer operator admin",
	"AlertService/ListAlerts":     "viewer operator admin",
	"AlertService/GetAlert":       "viewer operator admin",
	"ClusterService/ListClusters": "viewer operator admin",
	"MetricsService/QueryRange":   "viewer operator admin",
	"MetricsService/Query":        "viewer operator admin",
	"MetricsService/Series":       "viewer operator admin",
	"LogsService/Query":           "viewer operator admin",
	"LogsService/Stats":           "viewer operator admin",
	"LogsService/Trace":           "viewer operator admin",
	"StatsService/MetricStats":    "viewer operator admin",
	"StatsService/CountStats":     "viewer operator admin",
	"BillingService/Report":       "viewer operator admin",
}

// TestEveryProcedureAuthMatrix calls every procedure of the API, at a real
// cluster and a real root, as every kind of caller: no credential, a wrong
// one, a join token, a node's credential, and issued viewer, operator and
// admin tokens. A refusal must come before the handler (401, or 403 saying
// the caller "may not call" it); anything else means the call was let in.
func TestEveryProcedureAuthMatrix(t *testing.T) {
	f := newFleet(t, "")
	ctx := context.Background()
	nodeToken, err := enrolToken(ctx, f.clURL, &unyov1.Node{Name: "matrix-node"})
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]string{"cluster": f.clURL, "root": f.rootURL}
	for where, url := range servers {
		t.Run(where, func(t *testing.T) {
			callers := map[string]string{
				"none":     "",
				"wrong":    "not-a-token",
				"join":     joinToken,
				"viewer":   issue(t, url, "matrix-viewer", "--role", "viewer"),
				"operator": issue(t, url, "matrix-operator", "--role", "operator"),
				"admin":    issue(t, url, "matrix-admin", "--role", "admin"),
			}
			if where == "cluster" {
				callers["node"] = nodeToken
			}
			var services []protoreflect.ServiceDescriptor
			for _, f := range []protoreflect.FileDescriptor{unyov1.File_unyo_v1_unyo_proto, unyov1.File_unyo_v1_billing_proto} {
				for i := range f.Services().Len() {
					services = append(services, f.Services().Get(i))
				}
			}
			served := 0
			for _, svc := range services {
				for j := range svc.Methods().Len() {
					proc := string(svc.Name()) + "/" + string(svc.Methods().Get(j).Name())
					may, listed := callerMay[proc]
					if !listed {
						t.Errorf("%s is not in callerMay: classify it", proc)
						continue
					}
					for who, token := range callers {
						got, status := callProcedure(t, url, proc, token)
						if status == http.StatusNotFound {
							break // this tier does not serve the procedure
						}
						served++
						want := "let in"
						switch {
						case who == "none" || who == "wrong":
							want = "unauthenticated"
						case !strings.Contains(" "+may+" ", " "+who+" "):
							want = "denied"
						}
						if got != want {
							t.Errorf("%s at %s as %s: %s, want %s", proc, where, who, got, want)
						}
					}
				}
			}
			if served == 0 {
				t.Fatalf("no procedure answered at %s", where)
			}
		})
	}
}

// callProcedure posts an empty JSON request and tells whether the server
// refused the caller before the handler ("unauthenticated", "denied") or
// let the call in ("let in", whatever the handler then answered).
func callProcedure(t *testing.T, url, proc, token string) (string, int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/unyo.v1."+proc, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", proc, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return "unauthenticated", resp.StatusCode
	case resp.StatusCode == http.StatusForbidden && strings.Contains(string(body), "may not call"):
		return "denied", resp.StatusCode
	}
	return "let in", resp.StatusCode
}
