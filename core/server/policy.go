package server

import (
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
)

// Access is what a procedure requires of its caller before any of the
// request is read. Handlers check what depends on the request's content
// (the node an agent reports for, the kind being applied, the cluster
// scope) with the helpers in this package.
type Access int

const (
	// AccessAdmin: users with the admin role. Every procedure not in the
	// table below needs it, so a new procedure is closed until classified.
	AccessAdmin Access = iota
	// AccessRead: users with any role.
	AccessRead
	// AccessOperate: users with the operator role or more.
	AccessOperate
	// AccessWrite: operators or more; the handler checks the kind (most
	// kinds need admin, maintenance needs operator).
	AccessWrite
	// AccessAgent: a node's agent (its handler checks it acts only as
	// itself), and admins.
	AccessAgent
	// AccessEnrol: a join token enrols a node; nodes re-register.
	AccessEnrol
	// AccessClusterRegister: a cluster announcing itself to root with its
	// own credential.
	AccessClusterRegister
	// AccessAnyone: any authenticated caller.
	AccessAnyone
)

// procedures classifies every procedure of the API.
var procedures = map[string]Access{
	unyov1connect.AgentServiceRegisterProcedure:         AccessEnrol,
	unyov1connect.AgentServiceHeartbeatProcedure:        AccessAgent,
	unyov1connect.AgentServiceReportResultsProcedure:    AccessAgent,
	unyov1connect.AgentServiceGetChecksProcedure:        AccessAgent,
	unyov1connect.AgentServiceRenewCertificateProcedure: AccessAgent,
	unyov1connect.MetricsServiceWriteMetricsProcedure:   AccessAgent,
	unyov1connect.LogsServiceWriteLogsProcedure:         AccessAgent,
	// An agent's own assignments; SyncComputes is root's (admin level).
	unyov1connect.ProvisionServiceGetAssignmentsProcedure:    AccessAgent,
	unyov1connect.ProvisionServiceReportAssignmentsProcedure: AccessAgent,

	unyov1connect.ClusterServiceRegisterClusterProcedure: AccessClusterRegister,
	unyov1connect.ClusterServiceAddClusterProcedure:      AccessAdmin,
	unyov1connect.ClusterServiceDeleteClusterProcedure:   AccessAdmin,
	unyov1connect.NodeServiceDeleteNodeProcedure:         AccessAdmin,
	// Root records where nodes sit (with its credential, as for every
	// call to a cluster); admins may too.
	unyov1connect.NodeServiceSetNodeTopologyProcedure: AccessAdmin,
	unyov1connect.StatusServiceGetStatusProcedure:     AccessAnyone,

	unyov1connect.ObjectServiceApplyProcedure:  AccessWrite,
	unyov1connect.ObjectServiceDeleteProcedure: AccessWrite,

	unyov1connect.AlertServiceAckAlertProcedure:             AccessOperate,
	unyov1connect.AlertServiceCloseAlertProcedure:           AccessOperate,
	unyov1connect.MaintenanceServiceEndMaintenanceProcedure: AccessOperate,
	unyov1connect.NetworkServiceAllocateAddressProcedure:    AccessOperate,
	unyov1connect.NodeServiceCordonNodeProcedure:            AccessOperate,
	unyov1connect.NodeServiceDrainNodeProcedure:             AccessOperate,
	unyov1connect.NodeServiceSetNodeAutoProcedure:           AccessOperate,
	unyov1connect.NetworkServiceReleaseAddressProcedure:     AccessOperate,
	unyov1connect.ObjectServiceGetProcedure:                 AccessRead,
	unyov1connect.ObjectServiceListProcedure:                AccessRead,
	unyov1connect.NodeServiceListNodesProcedure:             AccessRead,
	unyov1connect.NodeServiceGetNodeProcedure:               AccessRead,
	unyov1connect.EventServiceListEventsProcedure:           AccessRead,
	unyov1connect.EventServiceGetEventProcedure:             AccessRead,
	unyov1connect.AlertServiceListAlertsProcedure:           AccessRead,
	unyov1connect.AlertServiceGetAlertProcedure:             AccessRead,
	unyov1connect.ClusterServiceListClustersProcedure:       AccessRead,
	unyov1connect.MetricsServiceQueryRangeProcedure:         AccessRead,
	unyov1connect.MetricsServiceQueryProcedure:              AccessRead,
	unyov1connect.MetricsServiceSeriesProcedure:             AccessRead,
	unyov1connect.LogsServiceQueryProcedure:                 AccessRead,
	unyov1connect.LogsServiceStatsProcedure:                 AccessRead,
	unyov1connect.LogsServiceTraceProcedure:                 AccessRead,
	unyov1connect.StatsServiceMetricStatsProcedure:          AccessRead,
	unyov1connect.StatsServiceCountStatsProcedure:           AccessRead,
	unyov1connect.BillingServiceReportProcedure:             AccessRead,

	// Issuing tokens and reading who did what are for admins only.
	unyov1connect.TokenServiceCreateTokenProcedure: AccessAdmin,
	unyov1connect.TokenServiceListTokensProcedure:  AccessAdmin,
	unyov1connect.TokenServiceRevokeTokenProcedure: AccessAdmin,
	unyov1connect.AuditServiceListAuditProcedure:   AccessAdmin,
}

// ClassifyProcedure adds or changes the access a procedure requires; for
// procedures defined outside this package's table (tests, future services).
// Call it before serving.
func (a *Auth) ClassifyProcedure(procedure string, access Access) {
	if a.extra == nil {
		a.extra = map[string]Access{}
	}
	a.extra[procedure] = access
}

func (a *Auth) access(procedure string) Access {
	if acc, ok := a.extra[procedure]; ok {
		return acc
	}
	return procedures[procedure] // AccessAdmin when absent
}

// authorize decides whether p may call procedure at all.
func (a *Auth) authorize(procedure string, p Principal) error {
	acc := a.access(procedure)
	if p.Kind == KindAnonymous {
		return nil
	}
	deny := func(need string) error {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s may not call %s: it needs %s", p.describe(), shortProcedure(procedure), need))
	}
	switch acc {
	case AccessAnyone:
		return nil
	case AccessAgent:
		// A join token only enrols (Register); from then on the agent
		// presents its node's own credential.
		if p.Kind == KindNode || (p.IsUser() && p.Role >= RoleAdmin) {
			return nil
		}
		return deny("a node's credential (an agent enrolled with a join token)")
	case AccessEnrol:
		if p.Kind == KindJoin || p.Kind == KindNode || (p.IsUser() && p.Role >= RoleAdmin) {
			return nil
		}
		return deny("a join token or a node's credential")
	case AccessClusterRegister:
		if p.Kind == KindCluster || (p.IsUser() && p.Role >= RoleAdmin) {
			return nil
		}
		return deny("this cluster's own credential (issued by root's operators)")
	}
	need := map[Access]Role{AccessRead: RoleViewer, AccessOperate: RoleOperator, AccessWrite: RoleOperator, AccessAdmin: RoleAdmin}[acc]
	// Root forwards operators' requests to clusters with the cluster's
	// credential; what the operator may do was decided at root.
	if p.Kind == KindRoot || (p.IsUser() && p.Role >= need) {
		return nil
	}
	return deny("the " + need.String() + " role")
}

func (p Principal) describe() string {
	switch p.Kind {
	case KindUser:
		return fmt.Sprintf("token %q (role %s)", p.Name, p.Role)
	case KindJoin:
		return "a join token"
	default:
		return fmt.Sprintf("%s %q", p.Kind, p.Name)
	}
}

func shortProcedure(p string) string { return strings.TrimPrefix(p, "/unyo.v1.") }
