// Package amapi serves the part of Prometheus Alertmanager's API v2 that
// amtool and karma use, over unyo's own services, so that operators keep
// their tools: GET /api/v2/alerts (with active, silenced, inhibited,
// unprocessed, receiver and filter parameters), /api/v2/alerts/groups,
// /api/v2/silences (GET, POST), /api/v2/silence/{id} (GET, DELETE),
// /api/v2/receivers and /api/v2/status.
//
// The handler calls the server's own connect services in process, with the
// caller's Authorization header, so the API has exactly the authentication,
// authorization, audit and (on root) cluster fan-out of AlertService and
// ObjectService: a viewer token lists alerts, a token that may write event
// rules creates silences.
//
// # Mapping
//
// An unyo alert (open or acknowledged; resolved and closed ones are not
// active, as Alertmanager drops resolved alerts) is a GettableAlert with
// labels alertname (the check), node, cluster, severity (the alert's
// level) and rule; annotations summary and alert_id; startsAt first seen,
// updatedAt last seen; receiver the rule that opened it; fingerprint the
// alert id. Its state is "suppressed" when acknowledged or when the
// pipeline silenced its latest result (silencedBy then names the silence
// rule, a silence's id, or "maintenance:NAME"), else "active"; inhibitedBy
// is always empty, as unyo has no inhibition.
//
// A silence is an EventRule of type silence. Matchers map onto the rule's
// match: alertname onto check and node onto node (regular expressions both,
// an equality matcher quoted), severity= onto levels, cluster= onto the
// rule's cluster, any other label= onto match.labels; createdBy is the
// owner, comment the reason, endsAt the rule's until. Negative matchers, a
// regular expression on another label and a silence starting in the future
// cannot be expressed and are refused with 400. The silence id is the
// rule's name (am-<16 hex digits>); expiring it deletes the rule. Every
// silence rule is listed, also those written as YAML.
package amapi
