// Package apihook is the api_hook action of event rules: an HTTP POST of a
// JSON payload about one event, or about the members of an aggregate
// group, to a receiver outside unyo.
//
// # Delivery
//
// Delivery is at least once. Every request carries
//
//	Content-Type: application/json
//	User-Agent: unyo
//	Idempotency-Key: <key>
//
// plus the action's own headers. The key is the same on every retry of one
// delivery and differs between deliveries (it is the rule and the event id,
// or the rule and the aggregate group's key), so a receiver that stores the
// keys it has seen can drop duplicates. A 2xx response is success; network
// errors, timeouts, 5xx and 429 are retried with backoff (see Send); any
// other response is final, redirects included: they are not followed. Only
// a response's status is kept, never its body. Where an api_hook may be
// sent is the cluster's Policy (cluster.api_hook.allow): loopback,
// link-local and cloud metadata addresses are refused unless allowed.
//
// # The unyo format
//
// format "unyo" (the default) sends one JSON object:
//
//	version  string  "unyo.v1"; a change of meaning gets a new version
//	key      string  the Idempotency-Key
//	rule     string  the event rule's name
//	cluster  string  the cluster the events come from
//	status   string  "firing", or "resolved" when the condition cleared
//	events   array   unyo.v1.Event objects: one event, or the members of an
//	                 aggregate group
//	alert    object  the unyo.v1.Alert the rule also opened, fired or
//	                 resolved; absent when it touched none
//
// Events and the alert are in protobuf's canonical JSON mapping with the
// schema's field names (as in rule files and the JSON API): enums by name
// ("LEVEL_CRITICAL"), times as RFC 3339 strings, durations as "0.120s",
// 64-bit integers as strings, and fields with zero values omitted.
// Receivers should ignore fields they do not know: fields are added
// without a version change. For example:
//
//	{
//	  "version": "unyo.v1",
//	  "key": "disk-page:0195f0c2-7a4e-7c1a-9b3e-2f6d8a1c4e5b",
//	  "rule": "disk-page",
//	  "cluster": "tokyo",
//	  "status": "firing",
//	  "events": [
//	    {
//	      "id": "0195f0c2-7a4e-7c1a-9b3e-2f6d8a1c4e5b",
//	      "cluster": "tokyo",
//	      "node": "web1",
//	      "check": "disk",
//	      "level": "LEVEL_CRITICAL",
//	      "status": "CHECK_STATUS_CRITICAL",
//	      "output": "DISK CRITICAL - / 95% used",
//	      "long_output": "/var 71% used",
//	      "exit_code": 2,
//	      "started_at": "2026-03-01T02:00:00Z",
//	      "duration": "0.120s",
//	      "received_at": "2026-03-01T02:00:00.300Z",
//	      "sequence": "42",
//	      "labels": {"rack": "r12"}
//	    }
//	  ],
//	  "alert": {
//	    "id": "0195f0c2-7b10-7d2e-8a4f-5c3b2a1d0e9f",
//	    "cluster": "tokyo",
//	    "key": "web1/disk",
//	    "level": "ALERT_LEVEL_CRITICAL",
//	    "state": "ALERT_STATE_OPEN",
//	    "node": "web1",
//	    "check": "disk",
//	    "summary": "DISK CRITICAL - / 95% used",
//	    "rule": "disk-page",
//	    "count": "1",
//	    "first_seen": "2026-03-01T02:00:00Z",
//	    "last_seen": "2026-03-01T02:00:00Z",
//	    "last_event_id": "0195f0c2-7a4e-7c1a-9b3e-2f6d8a1c4e5b",
//	    "history": [
//	      {"at": "2026-03-01T02:00:00Z", "to": "ALERT_STATE_OPEN", "by": "rule:disk-page", "reason": "fired"}
//	    ]
//	  }
//	}
//
// # The Alertmanager format
//
// format "alertmanager" sends the payload of Alertmanager's webhook
// receiver (version "4"), so that receivers written for Alertmanager work
// unchanged. Each event becomes one alert:
//
//	status       "resolved" if the payload is resolved or the event is a
//	             success, else "firing"
//	labels       the event's labels (the check's own, with the node's over
//	             them), then (overriding them)
//	             alertname = check, node, cluster, and severity = the
//	             alert's level (fatal, critical, warning) or, without an
//	             alert, the event's (critical, warning) or, for a success,
//	             the level last notified firing (Payload.Level); empty
//	             values are left out, as in Prometheus
//	annotations  summary = output, description = long_output, event_id,
//	             and alert_id when there is an alert; empty ones left out
//	startsAt     the alert's first_seen, else when the condition began
//	             firing as notified (Payload.Since), else when the check ran
//	endsAt       "0001-01-01T00:00:00Z" while firing; when resolved, when
//	             the clearing check ran
//	generatorURL Config.ExternalURL (the console), possibly empty
//	fingerprint  Prometheus' label fingerprint, 16 hex digits, over the
//	             labels except severity (see below)
//
// and the message around them:
//
//	receiver           the rule's name
//	status             the payload's status
//	commonLabels       labels every alert has with the same value
//	commonAnnotations  likewise for annotations
//	groupLabels        commonLabels without severity
//	groupKey           {}/{rule="NAME"}:{groupLabels}, as Alertmanager
//	                   prints a route key and a label set
//	externalURL        Config.ExternalURL
//	truncatedAlerts    0: unyo never truncates
//
// Where this departs from what Alertmanager itself would compute, it is so
// that one problem keeps one identity. Alertmanager hashes every label into
// the fingerprint, so a severity change would look like a new alert; unyo
// leaves severity out of fingerprint, groupLabels and groupKey, so the
// warning, critical and resolved notifications of one check on one node
// share them. Both are documented as opaque identifiers, which is how
// receivers use them. For the same reason the resolved notification keeps
// the firing's severity and start: from the alert the rule's alert actions
// left, else from what the pipeline recorded when it notified the firing.
//
// # The Alertmanager push format
//
// format "alertmanager_push" posts to an Alertmanager's /api/v2/alerts what
// Prometheus posts there: a JSON array of PostableAlerts, one per event,
// with the labels, annotations, startsAt and generatorURL of the webhook
// format above. A firing alert's endsAt is ValidResends (4) resend
// intervals (the action's repeat_interval, default 1m, Prometheus'
// resend delay) after its check ran: the pipeline sends it again every
// interval while it fires, and should unyo stop, Alertmanager resolves it
// after four missed resends, as it does for Prometheus. A resolved alert's
// endsAt is when the clearing check ran. Since severity is a label, and
// Alertmanager tells alerts apart by all their labels, a level change
// also resolves the alert of the previous severity (Payload.Level) in the
// same request.
package apihook
