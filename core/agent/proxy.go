package agent

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/unyo-ops/unyo/core/agent/metadata"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/server"
)

// computeToken is the join token the metadata endpoint gives compute: it
// is good only at this node's proxy for that compute's port (the proxy
// replaces it with the node's own credential), and stable across agent
// restarts (derived from the node's credential).
func (a *Agent) computeToken(compute string) string {
	key := a.token()
	if key == "" {
		key = a.nodeName()
	}
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("unyo compute token\x00" + compute))
	return "unyo-compute-" + hex.EncodeToString(m.Sum(nil)[:16])
}

// computeProxy forwards the calls an agent inside compute makes to
// 169.254.1.2/v1/proxy/... to the cluster with the node's own credential,
// naming the compute (server.HeaderCompute) from the port it came through
// (the metadata server checked its source address); whatever the compute
// set in those headers is dropped. The cluster lets the call act as the
// compute only if it is assigned to this node.
func (a *Agent) computeProxy(compute string) (http.Handler, error) {
	urls, err := client.SplitURLs(a.opts.ClusterURL)
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(urls[0])
	if err != nil {
		return nil, fmt.Errorf("agent.cluster_url: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tlsConf, err := a.opts.TLS.Config()
	if err != nil {
		return nil, err
	}
	if tlsConf != nil {
		tr.TLSClientConfig = tlsConf
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	// The node's certificate, when it authenticates with one.
	tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		c, err := a.nodeCert.clientCertificate()
		if c == nil {
			c = &tls.Certificate{}
		}
		return c, err
	}
	want := "Bearer " + a.computeToken(compute)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.URL.Path = strings.TrimSuffix(target.Path, "/") + "/" + strings.TrimPrefix(pr.In.URL.Path, metadata.ProxyPath)
			pr.Out.URL.RawPath = ""
			pr.Out.Host = target.Host
			pr.Out.Header.Del(server.HeaderCompute)
			pr.Out.Header.Del("Authorization")
			if t := a.token(); t != "" {
				pr.Out.Header.Set("Authorization", "Bearer "+t)
			}
			pr.Out.Header.Set(server.HeaderCompute, compute)
		},
		Transport:     tr,
		FlushInterval: -1,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
			http.Error(w, fmt.Sprintf("present the join token of compute %s (GET /v1/metadata) as a bearer token", compute), http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	}), nil
}
