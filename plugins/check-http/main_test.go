package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/plugins/internal/testbin"
	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

func handler(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/slow":
		time.Sleep(150 * time.Millisecond)
	case "/missing":
		w.WriteHeader(http.StatusNotFound)
	}
	fmt.Fprintf(w, "hello from %s, ua=%s", r.URL.Path, r.UserAgent())
}

func TestHTTPCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(handler))
	defer srv.Close()
	tsrv := httptest.NewTLSServer(http.HandlerFunc(handler))
	defer tsrv.Close()
	// httptest's certificate is valid until 2084: thresholds beyond that
	// must warn, below must pass.
	cert, _ := x509.ParseCertificate(tsrv.TLS.Certificates[0].Certificate[0])
	days := int(time.Until(cert.NotAfter).Hours()/24) + 10

	c := testbin.Serve(t, &httpCheck{}, map[string]any{"user_agent": "probe/1"})
	for name, tc := range map[string]struct {
		target map[string]any
		want   pluginv1.CheckStatus
	}{
		"ok":           {map[string]any{"url": srv.URL + "/", "body_match": "ua=probe/1"}, sdk.OK},
		"status":       {map[string]any{"url": srv.URL + "/missing"}, sdk.Critical},
		"status-ok":    {map[string]any{"url": srv.URL + "/missing", "expect_status": []any{404}}, sdk.OK},
		"body":         {map[string]any{"url": srv.URL + "/", "body_match": "^nothing$"}, sdk.Critical},
		"slow-warn":    {map[string]any{"url": srv.URL + "/slow", "warning": "100ms"}, sdk.Warning},
		"slow-crit":    {map[string]any{"url": srv.URL + "/slow", "warning": "50ms", "critical": "100ms"}, sdk.Critical},
		"refused":      {map[string]any{"url": "http://127.0.0.1:1/"}, sdk.Critical},
		"tls-untrust":  {map[string]any{"url": tsrv.URL + "/"}, sdk.Critical},
		"tls-ok":       {map[string]any{"url": tsrv.URL + "/", "insecure_skip_verify": true, "cert_warning_days": 30}, sdk.OK},
		"tls-expiring": {map[string]any{"url": tsrv.URL + "/", "insecure_skip_verify": true, "cert_warning_days": days}, sdk.Warning},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := c.Check.Run(context.Background(), &pluginv1.RunRequest{Target: testbin.Struct(t, tc.target), Timeout: durationpb.New(5 * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			if r.Result.Status != tc.want {
				t.Errorf("status %v, want %v: %s", r.Result.Status, tc.want, r.Result.Output)
			}
		})
	}
}
