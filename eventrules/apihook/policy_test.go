package apihook_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/eventrules/apihook"
)

// loopbackClient sends under a policy that allows the test receivers on
// 127.0.0.1, as a cluster whose allowlist lists it would.
func loopbackClient(t *testing.T) *http.Client {
	t.Helper()
	p, err := apihook.ParsePolicy([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	return apihook.NewClient(p)
}

func TestPolicyRefusesLoopbackByDefault(t *testing.T) {
	rc := newReceiver(t, response{status: http.StatusOK})
	for name, hc := range map[string]*http.Client{"nil client": nil, "NewClient(nil)": apihook.NewClient(nil)} {
		t.Run(name, func(t *testing.T) {
			out := apihook.Send(t.Context(), hc, fast(rc.URL), payload())
			var de *apihook.DestinationError
			if out.Succeeded || out.Attempts != 1 || !errors.As(out.Err, &de) {
				t.Fatalf("outcome = %+v, want one attempt refused with a DestinationError", out)
			}
			if want := "destination 127.0.0.1 refused: a loopback address is refused unless cluster.api_hook.allow lists it (as 127.0.0.1/32)"; !strings.Contains(out.String(), want) {
				t.Errorf("String = %q, want it to contain %q", out.String(), want)
			}
		})
	}
	if rc.count() != 0 {
		t.Errorf("the receiver on loopback got %d requests", rc.count())
	}
}

func TestPolicyAllowlistAllowsLoopback(t *testing.T) {
	rc := newReceiver(t, response{status: http.StatusOK})
	out := apihook.Send(t.Context(), loopbackClient(t), fast(rc.URL), payload())
	if !out.Succeeded || rc.count() != 1 {
		t.Fatalf("outcome = %+v, receiver saw %d", out, rc.count())
	}
}

// A host name is checked by the address it resolves to, when dialled: the
// name "localhost" is no way around the loopback rule, even when the
// allowlist names it.
func TestPolicyRefusesHostnameResolvingToLoopback(t *testing.T) {
	rc := newReceiver(t, response{status: http.StatusOK})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(rc.URL, "http://"))
	for name, allow := range map[string][]string{"default": nil, "named": {"localhost"}} {
		t.Run(name, func(t *testing.T) {
			p, err := apihook.ParsePolicy(allow)
			if err != nil {
				t.Fatal(err)
			}
			out := apihook.Send(t.Context(), apihook.NewClient(p), fast("http://localhost:"+port), payload())
			var de *apihook.DestinationError
			if out.Succeeded || !errors.As(out.Err, &de) || !strings.Contains(de.Rule, "loopback") {
				t.Fatalf("outcome = %+v, want refused as loopback", out)
			}
		})
	}
	if rc.count() != 0 {
		t.Errorf("the receiver got %d requests", rc.count())
	}
}

func TestPolicyRefusesMetadataAddress(t *testing.T) {
	out := apihook.Send(t.Context(), loopbackClient(t), fast("http://169.254.169.254/latest/meta-data"), payload())
	var de *apihook.DestinationError
	if out.Succeeded || out.Attempts != 1 || !errors.As(out.Err, &de) || de.Addr != "169.254.169.254" {
		t.Fatalf("outcome = %+v, want one attempt refused for 169.254.169.254", out)
	}
	if !strings.Contains(out.String(), "the cloud metadata address is refused") {
		t.Errorf("String = %q does not name the rule", out.String())
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	target := newReceiver(t, response{status: http.StatusOK})
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/hook", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redir.Close)
	out := apihook.Send(t.Context(), loopbackClient(t), fast(redir.URL), payload())
	if out.Succeeded || out.Attempts != 1 || out.Status != http.StatusTemporaryRedirect {
		t.Fatalf("outcome = %+v, want one attempt ending at the 307", out)
	}
	if !strings.Contains(out.String(), "redirects are not followed") {
		t.Errorf("String = %q", out.String())
	}
	if target.count() != 0 {
		t.Errorf("the redirect was followed: target saw %d requests", target.count())
	}
}
