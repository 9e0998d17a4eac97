// Package metadata is the node agent's endpoint for one compute: it
// answers on 169.254.1.2 inside the compute's port namespace (see
// core/agent/portnet), so only that compute reaches it, and it trusts the
// connection's source address, never anything the client sends: a request
// from any address but the compute's is refused.
//
//	GET /v1/metadata    the compute's name, service, addresses, node,
//	                    cluster, the cluster's URL as seen through the
//	                    proxy, and a join token scoped to this compute
//	/v1/proxy/...       the proxy to the cluster (an agent inside the
//	                    compute talks to the cluster through it; the node's
//	                    agent forwards with its own credential and names
//	                    the compute)
package metadata

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
)

// ProxyPath is where the proxy answers; an agent inside the compute uses
// http://169.254.1.2:PORT/v1/proxy as its cluster URL.
const ProxyPath = "/v1/proxy/"

// Info is what the metadata endpoint tells a compute of itself.
type Info struct {
	Compute string `json:"compute"`
	Service string `json:"service,omitempty"`
	Node    string `json:"node"`
	Cluster string `json:"cluster,omitempty"`
	// Addresses are the compute's own (its /32 from the Network's IPAM).
	Addresses []string `json:"addresses"`
	// LinkAddress is its port's link address on the node.
	LinkAddress string `json:"link_address,omitempty"`
	// Gateway is the compute's default gateway.
	Gateway string `json:"gateway,omitempty"`
	// ClusterURL is the cluster as the compute reaches it: the proxy.
	ClusterURL string `json:"cluster_url,omitempty"`
	// JoinToken registers an agent inside the compute as the compute
	// (empty until the cluster issues compute-scoped tokens).
	JoinToken string `json:"join_token,omitempty"`
}

// Server answers one compute.
type Server struct {
	info Info
	// from are the source addresses that are the compute.
	from  []netip.Addr
	proxy http.Handler
	mux   *http.ServeMux
}

// New returns the endpoint of the compute info describes; from are the
// source addresses taken as the compute (its address, and for a process
// running in the port namespace itself the metadata address it connects
// from); proxy, if not nil, serves ProxyPath.
func New(info Info, from []netip.Addr, proxy http.Handler) *Server {
	s := &Server{info: info, from: from, proxy: proxy, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /v1/metadata", s.metadata)
	if proxy != nil {
		s.mux.Handle(ProxyPath, proxy)
	}
	return s
}

// Source is the source address of r as the kernel gave it.
func Source(r *http.Request) (netip.Addr, error) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("source address %q: %w", r.RemoteAddr, err)
	}
	return ap.Addr().Unmap(), nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	src, err := Source(r)
	if err != nil || !slices.Contains(s.from, src) {
		http.Error(w, fmt.Sprintf("this endpoint answers only compute %s from its own address, not %s", s.info.Compute, r.RemoteAddr), http.StatusForbidden)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s.info)
}
