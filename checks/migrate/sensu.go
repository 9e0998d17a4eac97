package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Node selector labels of imported Sensu checks: a check subscribed to S
// runs on the nodes labelled SubscriptionLabel+S, one subscribed to
// "entity:NAME" on the node labelled EntityLabel+NAME.
const (
	SubscriptionLabel = "sensu.subscription/"
	EntityLabel       = "sensu.entity/"
)

// sensuMetricFormats maps output_metric_format to spec.metrics_format.
var sensuMetricFormats = map[string]string{
	"nagios_perfdata":    "nagios",
	"graphite_plaintext": "graphite",
	"influxdb_line":      "influx",
	"opentsdb_line":      "opentsdb",
	"prometheus_text":    "prometheus",
}

// sensuUnsupported explains the CheckConfig fields a unyo check has no
// equivalent of.
var sensuUnsupported = map[string]string{
	"handlers":                 "unyo notifies through event rules (kind EventRule)",
	"output_metric_handlers":   "a check's metrics go to its cluster's TSDB",
	"pipelines":                "unyo notifies through event rules (kind EventRule)",
	"runtime_assets":           "install the plugin on the nodes (or a check plugin)",
	"check_hooks":              "no hooks: run diagnostics from an event rule's action",
	"proxy_entity_name":        "checks run on and report for their own node",
	"proxy_requests":           "checks run on and report for their own node",
	"subdue":                   "use a maintenance window",
	"high_flap_threshold":      "no flap detection; occurrences and reissue damp noise",
	"low_flap_threshold":       "no flap detection; occurrences and reissue damp noise",
	"secrets":                  "put secrets in the agent's environment (agent.check_env)",
	"output_metric_tags":       "metrics are labelled with check and node",
	"output_metric_thresholds": "use a metric check",
}

// Sensu translates Sensu Go check definitions (sensuctl's YAML or JSON,
// `type: CheckConfig` with metadata and spec, several per file): each
// subscription becomes a node selector (one Check per subscription when
// there are several, since a selector is one set of labels), interval,
// cron, timeout and ttl their unyo fields (seconds become durations), and
// output_metric_format spec.metrics_format.
func Sensu(files []File) Result {
	var res Result
	nm := names{}
	for _, f := range files {
		docs, err := sensuDocuments(f.Data)
		if err != nil {
			res.Notes = append(res.Notes, Note{f.Name, fmt.Sprintf("not read: %v", err)})
		}
		for i, d := range docs {
			where := fmt.Sprintf("%s: document %d", f.Name, i+1)
			cs, notes := sensuCheck(d, where, nm)
			res.Checks = append(res.Checks, cs...)
			res.Notes = append(res.Notes, notes...)
		}
	}
	return res
}

// sensuDocuments decodes a stream of JSON objects or YAML documents.
func sensuDocuments(data []byte) ([]map[string]any, error) {
	var docs []map[string]any
	if t := bytes.TrimSpace(data); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		dec := json.NewDecoder(bytes.NewReader(t))
		for {
			var v any
			if err := dec.Decode(&v); errors.Is(err, io.EOF) {
				return docs, nil
			} else if err != nil {
				return docs, err
			}
			switch v := v.(type) {
			case map[string]any:
				docs = append(docs, v)
			case []any:
				for _, e := range v {
					if m, ok := e.(map[string]any); ok {
						docs = append(docs, m)
					}
				}
			}
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return docs, nil
		} else if err != nil {
			return docs, err
		}
		if m != nil {
			docs = append(docs, m)
		}
	}
}

// seconds reads a Sensu count of seconds (YAML int or JSON number).
func seconds(v any) (time.Duration, bool) {
	switch n := v.(type) {
	case int:
		return time.Duration(n) * time.Second, n >= 0
	case float64:
		return time.Duration(n * float64(time.Second)), n >= 0 && n == float64(int64(n))
	}
	return 0, false
}

func sensuCheck(doc map[string]any, where string, nm names) ([]*unyov1.Check, []Note) {
	var notes []Note
	note := func(format string, args ...any) { notes = append(notes, Note{where, fmt.Sprintf(format, args...)}) }
	if t, _ := doc["type"].(string); t != "" && t != "CheckConfig" {
		note("type %s is not translated (unyo imports CheckConfig)", t)
		return nil, notes
	}
	meta, _ := doc["metadata"].(map[string]any)
	spec, _ := doc["spec"].(map[string]any)
	if spec == nil {
		spec = doc // sensuctl's older, unwrapped form: the fields at the top
	}
	if meta == nil {
		meta = map[string]any{"name": spec["name"], "namespace": spec["namespace"]}
	}
	name, _ := meta["name"].(string)
	if name == "" {
		note("a check without metadata.name is not translated")
		return nil, notes
	}
	where = fmt.Sprintf("%s (check %q)", where, name)
	if ns, _ := meta["namespace"].(string); ns != "" && ns != "default" {
		note("namespace %q is not translated: give the checks the cluster that stands for it (cluster: in the documents)", ns)
	}
	if p, ok := spec["publish"].(bool); ok && !p {
		note("publish: false (never scheduled) is not translated: unyo runs every check it has; left out")
		return nil, notes
	}
	cs := &unyov1.CheckSpec{}
	command, _ := spec["command"].(string)
	if strings.Contains(command, "{{") {
		note("command %q uses Sensu tokens, which unyo does not substitute; left out", command)
		return nil, notes
	}
	if command == "" {
		note("no command; left out")
		return nil, notes
	}
	cs.Command = argv(command)
	if v, ok := spec["interval"]; ok && v != nil {
		if d, ok := seconds(v); ok && d > 0 {
			cs.Interval = d.String()
		} else if !ok {
			note("interval %v is not a count of seconds", v)
		}
	}
	if c, _ := spec["cron"].(string); c != "" {
		cs.Cron = c
		cs.Interval = "" // Sensu lets cron win too
	}
	if v, ok := spec["timeout"]; ok && v != nil {
		if d, ok := seconds(v); ok && d > 0 {
			cs.Timeout = d.String()
		} else if ok {
			note("timeout 0 (none) is not translated: a unyo check's timeout defaults to 30s, or its interval when shorter")
		}
	}
	if v, ok := spec["ttl"]; ok && v != nil {
		if d, ok := seconds(v); ok && d > 0 {
			cs.Ttl = d.String()
		}
	}
	if f, _ := spec["output_metric_format"].(string); f != "" {
		if m, ok := sensuMetricFormats[f]; ok {
			cs.MetricsFormat = m
		} else {
			note("output_metric_format %q is not one unyo reads", f)
		}
	}
	if env, _ := spec["env_vars"].([]any); len(env) > 0 {
		cs.Env = map[string]string{}
		for _, e := range env {
			k, v, _ := strings.Cut(fmt.Sprint(e), "=")
			cs.Env[k] = v
		}
	}
	if rr, _ := spec["round_robin"].(bool); rr {
		note("round_robin is not translated: the check runs on every node its selector chooses")
	}
	for _, k := range slices.Sorted(maps.Keys(spec)) {
		why, unsupported := sensuUnsupported[k]
		if unsupported && !empty(spec[k]) {
			note("%s is not translated: %s", k, why)
		}
	}
	var labels map[string]string
	if l, _ := meta["labels"].(map[string]any); len(l) > 0 {
		labels = map[string]string{}
		for k, v := range l {
			labels[k] = fmt.Sprint(v)
		}
	}

	var subs []string
	if l, _ := spec["subscriptions"].([]any); len(l) > 0 {
		for _, s := range l {
			subs = append(subs, fmt.Sprint(s))
		}
	}
	if len(subs) == 0 {
		note("no subscriptions: Sensu schedules it nowhere; left out")
		return nil, notes
	}
	var out []*unyov1.Check
	for _, s := range subs {
		c := &unyov1.Check{Labels: maps.Clone(labels), Spec: &unyov1.CheckSpec{
			Command: cs.Command, Interval: cs.Interval, Cron: cs.Cron, Timeout: cs.Timeout, Ttl: cs.Ttl,
			MetricsFormat: cs.MetricsFormat, Env: maps.Clone(cs.Env)}}
		if len(subs) == 1 {
			c.Name = nm.of(name)
		} else {
			c.Name = nm.of(name, strings.TrimPrefix(s, "entity:"))
		}
		if e, ok := strings.CutPrefix(s, "entity:"); ok {
			c.Spec.NodeSelector = map[string]string{EntityLabel + e: "true"}
		} else {
			c.Spec.NodeSelector = map[string]string{SubscriptionLabel + s: "true"}
		}
		out = append(out, c)
	}
	return out, notes
}

// empty reports whether a decoded field holds nothing (null, "", [], {},
// false, 0).
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	case bool:
		return !v
	case int:
		return v == 0
	case float64:
		return v == 0
	}
	return false
}
