package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Kind says what sort of party a credential stands for.
type Kind string

const (
	// KindUser is an operator (or a script) with a token and a role.
	KindUser Kind = "user"
	// KindNode is one node's agent, identified by its node credential or
	// client certificate; it may act only as that node.
	KindNode Kind = "node"
	// KindCluster is one registered cluster calling root.
	KindCluster Kind = "cluster"
	// KindRoot is root calling a cluster with that cluster's credential.
	KindRoot Kind = "root"
	// KindJoin holds a join token: it may only enrol.
	KindJoin Kind = "join"
	// KindAnonymous is every caller of a server without authentication
	// (unyo dev on loopback): it may do everything.
	KindAnonymous Kind = "anonymous"
)

// Role orders what a user may do; each role may do what the ones below it may.
type Role int

const (
	RoleNone Role = iota
	// RoleViewer reads everything in its scope.
	RoleViewer
	// RoleOperator also acknowledges and closes alerts and opens and ends
	// maintenance.
	RoleOperator
	// RoleAdmin also applies and deletes every kind of object.
	RoleAdmin
)

// roleNames is the one table of role names, both ways.
var roleNames = []string{RoleNone: "none", RoleViewer: "viewer", RoleOperator: "operator", RoleAdmin: "admin"}

func (r Role) String() string {
	if int(r) < len(roleNames) && r >= 0 {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole reads a role name as the CLI and configuration spell it.
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames {
		if i > 0 && strings.EqualFold(s, n) {
			return Role(i), nil
		}
	}
	return RoleNone, fmt.Errorf("unknown role %q: use one of %s", s, strings.Join(roleNames[1:], ", "))
}

// Principal is who a request acts as. It comes only from a credential the
// server verified, never from what the request says about itself.
type Principal struct {
	Kind Kind
	// Name is recorded as "who" in the audit log and in alert history: a
	// token's name, a node's or a cluster's name.
	Name string
	Role Role
	// Commands is the separate right to apply checks that run commands on
	// agents (command checks run a shell on every selected node).
	Commands bool
	// Clusters limits the principal to these clusters; empty means all.
	Clusters []string
	// Kinds limits writes (apply, delete) to these object kinds; empty means all.
	Kinds []string
	// From is the address the request came from, for the audit log.
	From string
	// Via is the node whose agent forwarded the call of a compute (Name)
	// through its proxy.
	Via string
}

// Anonymous is every caller of a server that has no authentication.
func Anonymous(from string) Principal {
	return Principal{Kind: KindAnonymous, Name: "anonymous", Role: RoleAdmin, Commands: true, From: from}
}

func (p Principal) String() string {
	if p.Kind == KindUser {
		return p.Name
	}
	return string(p.Kind) + ":" + p.Name
}

// InCluster reports whether p may see and act in the named cluster.
func (p Principal) InCluster(name string) bool {
	return len(p.Clusters) == 0 || slices.Contains(p.Clusters, name)
}

// MayWriteKind reports whether p's scope covers objects of kind.
func (p Principal) MayWriteKind(kind string) bool {
	return len(p.Kinds) == 0 || slices.ContainsFunc(p.Kinds, func(k string) bool { return strings.EqualFold(k, kind) })
}

// IsUser reports whether p is a person or script with a role (or anybody on
// a server without authentication), as opposed to a node, cluster or root.
func (p Principal) IsUser() bool { return p.Kind == KindUser || p.Kind == KindAnonymous }

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal a request acts as. A context that
// never passed the server's authentication (a test, an internal call) gets
// no rights at all.
func PrincipalFrom(ctx context.Context) Principal {
	p, ok := ctx.Value(principalKey{}).(Principal)
	if !ok {
		return Principal{Kind: KindUser, Name: "unauthenticated", Role: RoleNone}
	}
	return p
}
