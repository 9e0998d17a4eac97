package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/testutil"
)

// issue creates a token at server with the admin token and returns its secret.
func issue(t *testing.T, server, name string, flags ...string) string {
	t.Helper()
	out, err := cli(t, server, append([]string{"--token", adminToken, "tokens", "create", name}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// outcome classes of one call in the auth matrix.
const (
	unauth = "unauthenticated"
	denied = "denied"
	ok     = "ok" // anything else: the call was let through (it may be not found)
)

func classify(err error) string {
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated:
		return unauth
	case connect.CodePermissionDenied:
		return denied
	}
	return ok
}

// TestRBAC checks scoped tokens against a real root and cluster: every
// operator procedure for every kind of caller, scope of reads, revocation
// and expiry, identity from the token for ack and close, and the audit log.
func TestRBAC(t *testing.T) {
	f := newFleet(t, "")
	callers := []string{"none", "wrong", "viewer", "operator", "admin", "admin-nocmd", "viewer-other", "operator-other"}
	secrets := map[string]string{
		"none":           "",
		"wrong":          "unyo_not-a-token-this-server-issued",
		"viewer":         issue(t, f.rootURL, "viewer", "--role", "viewer"),
		"operator":       issue(t, f.rootURL, "operator", "--role", "operator"),
		"admin":          issue(t, f.rootURL, "admin", "--role", "admin", "--commands"),
		"admin-nocmd":    issue(t, f.rootURL, "admin-nocmd", "--role", "admin"),
		"viewer-other":   issue(t, f.rootURL, "viewer-other", "--role", "viewer", "--clusters", "other"),
		"operator-other": issue(t, f.rootURL, "operator-other", "--role", "operator", "--clusters", "other"),
	}
	const (
		U = unauth
		D = denied
		K = ok
	)
	maint := func(name string) *unyov1.Object {
		return &unyov1.Object{Kind: &unyov1.Object_Maintenance{Maintenance: &unyov1.Maintenance{Name: name, Cluster: "c1",
			Spec: &unyov1.MaintenanceSpec{Nodes: []string{"nothing-here"}, Owner: "ops", Reason: "auth matrix"}}}}
	}
	commandCheck := &unyov1.Object{Kind: &unyov1.Object_Check{Check: &unyov1.Check{Name: "shell", Cluster: "c1",
		Spec: &unyov1.CheckSpec{Command: []string{"check_dummy", "0", "ran"}, Interval: "1h", NodeSelector: map[string]string{"role": "none"}}}}}
	type call func(ctx context.Context, c *client.Clients, who string) error
	matrix := []struct {
		proc string
		call call
		want []string // by callers
	}{
		{"ObjectService/Get", func(ctx context.Context, c *client.Clients, _ string) error {
			_, err := c.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "Check", Name: "x", Cluster: "c1"}}))
			return err
		}, []string{U, U, K, K, K, K, D, D}},
		{"ObjectService/List", func(ctx context.Context, c *client.Clients, _ string) error {
			_, err := c.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: "Check", Cluster: "c1"}))
			return err
		}, []string{U, U, K, K, K, K, D, D}},
		{"ObjectService/Apply maintenance", func(ctx context.Context, c *client.Clients, who string) error {
			_, err := c.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{maint("m-" + who)}}))
			return err
		}, []string{U, U, D, K, K, K, D, D}},
		{"ObjectService/Apply command check", func(ctx context.Context, c *client.Clients, _ string) error {
			_, err := c.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{commandCheck}}))
			return err
		}, []string{U, U, D, D, K, D, D, D}},
		{"ObjectService/Delete", func(ctx context.Context, c *client.Clients, _ string) error {
			_, err := c.Objects.Delete(ctx, connect.NewRequest(&unyov1.DeleteRequest{Refs: []*unyov1.ObjectRef{{Kind: "Check", Name: "absent", Cluster: "c1"}}}))
			return err
		}, []string{U, U, D, D, K, K, D, D}},
		{"AlertService/ListAlerts", func(ctx context.Context, c *client.Clients, _ string) error {
			_, err := c.Alerts.ListAlerts(ctx, connect.NewRequest(&unyov1.ListAlertsRequest{Cluster: "c1"}))
			return err
		}, []string{U, U, K, K, K, K, D, D}},
		{"AlertService/GetAlert", func(ctx context.Context, c *client.Clients, _ string) error {
			_, err := c.Alerts.GetAlert(ctx, connect.NewRequest(&unyov1.GetAlertRequest{Id: "absent", Cluster: "c1"}))
			return err
		}, []string{U, U, K, K, K, K, D, D}},
		{"AlertService/AckAlert", func(ctx context.Context, c *client.Clients, _ string) error {
			_, err := c.Alerts.AckAlert(ctx, connect.NewRequest(&unyov1.AlertActionRequest{Id: "absent", Cluster: "c1", By: "x"}))
			return err
		}, []string{U, U, D, K, K, K, D, D}},
		{"AlertService/CloseAlert", func(ctx context.Context, c *client.Clients, _ string) error {
			_, err := c.Alerts.CloseAlert(ctx, connect.NewRequest(&unyov1.AlertActionRequest{Id: "absent", Cluster: "c1", By: "x", Reason: "r"}))
			return err
		}, []string{U, U, D, K, K, K, D, D}},
		{"MaintenanceService/EndMaintenance", func(ctx context.Context, c *client.Clients, _ string) error {
			_, err := c.Maintenance.EndMaintenance(ctx, connect.NewRequest(&unyov1.EndMaintenanceRequest{Name: "absent", Cluster: "c1", By: "x"}))
			return err
		}, []string{U, U, D, K, K, K, D, D}},
		{"TokenService/CreateToken", func(ctx context.Context, c *client.Clients, who string) error {
			_, err := c.Tokens.CreateToken(ctx, connect.NewRequest(&unyov1.CreateTokenRequest{Name: "made-by-" + who, Role: "viewer"}))
			return err
		}, []string{U, U, D, D, K, K, D, D}},
		{"TokenService/ListTokens", func(ctx context.Context, c *client.Clients, _ string) error {
			_, err := c.Tokens.ListTokens(ctx, connect.NewRequest(&unyov1.ListTokensRequest{}))
			return err
		}, []string{U, U, D, D, K, K, D, D}},
		{"TokenService/RevokeToken", func(ctx context.Context, c *client.Clients, _ string) error {
			_, err := c.Tokens.RevokeToken(ctx, connect.NewRequest(&unyov1.RevokeTokenRequest{Name: "absent"}))
			return err
		}, []string{U, U, D, D, K, K, D, D}},
		{"AuditService/ListAudit", func(ctx context.Context, c *client.Clients, _ string) error {
			_, err := c.Audit.ListAudit(ctx, connect.NewRequest(&unyov1.ListAuditRequest{}))
			return err
		}, []string{U, U, D, D, K, K, D, D}},
	}
	for _, m := range matrix {
		for i, who := range callers {
			c, err := client.New(client.Options{URL: f.rootURL, Token: secrets[who]})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			err = m.call(ctx, c, who)
			cancel()
			if got := classify(err); got != m.want[i] {
				t.Errorf("%s as %s: %s (%v), want %s", m.proc, who, got, err, m.want[i])
			}
		}
	}

	// A viewer scoped to another cluster sees none of c1's data.
	if _, err := f.cli("apply", "-f", writeFile(t, f.dir, "disk.yaml", `
kind: Check
name: disk
spec: {command: [check_dummy, "0", "fine"], interval: 1m, env: {PGPASSWORD: hunter2}}
`)); err != nil {
		t.Fatal(err)
	}
	for who, want := range map[string]int{"viewer": 2, "viewer-other": 0} { // disk and the matrix's shell
		items, err := cliJSON(t, f.rootURL, "--token", secrets[who], "checks", "ls")
		if err != nil || len(items) != want {
			t.Errorf("checks ls as %s: %v, %d checks, want %d", who, err, len(items), want)
		}
	}
	if out, err := cli(t, f.rootURL, "--token", secrets["viewer-other"], "clusters", "ls"); err != nil || strings.Contains(out, "c1") {
		t.Errorf("clusters ls as a viewer of another cluster shows c1: %v\n%s", err, out)
	}

	// A revoked token is refused within a few seconds; an expired one too.
	temp := issue(t, f.rootURL, "temp", "--role", "viewer")
	short := issue(t, f.rootURL, "short", "--role", "viewer", "--expires", "3s")
	if _, err := cli(t, f.rootURL, "--token", temp, "nodes", "ls"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cli("tokens", "revoke", "temp"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the revoked token refused", func() error {
		_, err := cli(t, f.rootURL, "--token", temp, "nodes", "ls")
		if err == nil || !strings.Contains(err.Error(), "revoked") {
			return fmt.Errorf("nodes ls with a revoked token: %v", err)
		}
		return nil
	})
	testutil.Eventually(t, 15*time.Second, "the expired token refused", func() error {
		_, err := cli(t, f.rootURL, "--token", short, "nodes", "ls")
		if err == nil || !strings.Contains(err.Error(), "expired") {
			return fmt.Errorf("nodes ls with an expired token: %v", err)
		}
		return nil
	})
	ls, err := f.cli("tokens", "ls")
	if err != nil || !strings.Contains(ls, "revoked") || !strings.Contains(ls, "expired") || strings.Contains(ls, temp) {
		t.Errorf("tokens ls: %v\n%s", err, ls)
	}

	// Ack and close record the token's name, whatever --by says.
	rules, err := os.ReadFile("../configs/resources/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cli("apply", "-f", writeFile(t, f.dir, "rules.yaml", string(rules))); err != nil {
		t.Fatal(err)
	}
	f.agent("web1", "{role: web}", "  checks:\n    - name: broken\n      spec: {command: [check_dummy, \"2\", broken], interval: 1s}\n")
	var id string
	testutil.Eventually(t, 30*time.Second, "an alert for web1/broken", func() error {
		as := f.alertsWhere("web1", "broken")
		if len(as) != 1 {
			return fmt.Errorf("alerts: %v", as)
		}
		id = str(as[0], "id")
		return nil
	})
	if _, err := cli(t, f.rootURL, "--token", secrets["operator"], "alerts", "ack", id, "--by", "mallory"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli(t, f.rootURL, "--token", secrets["operator"], "alerts", "close", id, "--by", "mallory", "--reason", "known"); err != nil {
		t.Fatal(err)
	}
	got, err := f.json("alerts", "get", id)
	if err != nil || len(got) != 1 {
		t.Fatalf("alerts get: %v %v", err, got)
	}
	b, _ := json.Marshal(got[0]["history"])
	if strings.Contains(string(b), "mallory") || strings.Count(string(b), `"by":"operator"`) != 2 {
		t.Errorf("alert history records --by instead of the token's name: %s", b)
	}

	// The audit log at root says who applied what, with before and after,
	// and never a secret.
	if _, err := cli(t, f.rootURL, "--token", secrets["admin"], "apply", "-f", writeFile(t, f.dir, "disk2.yaml", `
kind: Check
name: disk
spec: {command: [check_dummy, "0", "fine"], interval: 2m, env: {PGPASSWORD: hunter2}}
`)); err != nil {
		t.Fatal(err)
	}
	recs, err := f.json("audit", "ls", "--who", "admin", "--kind", "Check")
	if err != nil {
		t.Fatal(err)
	}
	var change map[string]any
	for _, r := range recs {
		if str(r, "name") == "disk" && str(r, "outcome") == "ok" {
			change = r
			break
		}
	}
	if change == nil || !strings.Contains(str(change, "before"), `"1m"`) || !strings.Contains(str(change, "after"), `"2m"`) || str(change, "cluster") != "c1" {
		t.Errorf("audit ls has no record of admin changing disk from 1m to 2m: %v", recs)
	}
	all, err := f.cli("audit", "ls", "--limit", "1000", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"hunter2", secrets["admin"], secrets["operator"], temp} {
		if strings.Contains(all, secret) {
			t.Errorf("the audit log holds a secret (%.8s...)", secret)
		}
	}
	items, err := f.json("audit", "ls", "--limit", "1000")
	if err != nil {
		t.Fatal(err)
	}
	has := func(what string, match func(r map[string]any) bool) {
		t.Helper()
		for _, r := range items {
			if match(r) {
				return
			}
		}
		t.Errorf("audit ls has no record of %s", what)
	}
	has("the operator's ack, forwarded by root to c1", func(r map[string]any) bool {
		return str(r, "who") == "operator" && str(r, "procedure") == "AlertService/AckAlert" && str(r, "cluster") == "c1" &&
			strings.Contains(str(r, "from"), "forwarded by") && str(r, "outcome") == "ok"
	})
	has("the revocation, at root", func(r map[string]any) bool {
		return str(r, "procedure") == "TokenService/RevokeToken" && str(r, "name") == "temp" && str(r, "cluster") == ""
	})
	has("the viewer's apply, refused before its body was read", func(r map[string]any) bool {
		return str(r, "who") == "viewer" && str(r, "procedure") == "ObjectService/Apply" && strings.HasPrefix(str(r, "outcome"), "denied: ")
	})
	has("the refused command check of admin-nocmd", func(r map[string]any) bool {
		return str(r, "who") == "admin-nocmd" && str(r, "name") == "shell" && strings.HasPrefix(str(r, "outcome"), "denied: ")
	})
	table, err := f.cli("audit", "ls", "--who", "operator")
	if err != nil || !strings.Contains(table, "AlertService/CloseAlert") || !strings.Contains(table, "Alert/"+id) {
		t.Errorf("audit ls table: %v\n%s", err, table)
	}
}
