package printer

import (
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// PluginRow is one plugin where it runs: on a node's agent (Node set) or
// on a cluster server (Node empty).
type PluginRow struct {
	Cluster string
	Node    string
	Status  *unyov1.PluginStatus
}

// Where is the WHERE column: the node's name, or cluster:<name>.
func (r PluginRow) Where() string {
	if r.Node != "" {
		return r.Node
	}
	return "cluster:" + r.Cluster
}

// Plugins prints plugin statuses: in a table WHERE, KIND, NAME, VERSION,
// STATE, RESTARTS, SINCE and LAST ERROR. In JSON and YAML each item is the
// PluginStatus with where, cluster and node in front.
func Plugins(w io.Writer, format string, rows []PluginRow) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return p.plugins(rows)
}

func (p *printer) plugins(rows []PluginRow) error {
	if p.format == JSON || p.format == YAML {
		docs := make([][]byte, len(rows))
		for i, r := range rows {
			b, err := marshal(r.Status)
			if err != nil {
				return err
			}
			head, err := json.Marshal(struct {
				Where   string `json:"where"`
				Cluster string `json:"cluster"`
				Node    string `json:"node"`
			}{r.Where(), r.Cluster, r.Node})
			if err != nil {
				return err
			}
			// Splice the PluginStatus' fields after where, cluster and node.
			doc := append(head[:len(head)-1:len(head)-1], ',')
			if rest := b[1:]; len(rest) > 0 && rest[0] != '}' {
				doc = append(doc, rest...)
			} else {
				doc = append(doc[:len(doc)-1], '}')
			}
			docs[i] = doc
		}
		if p.format == JSON {
			return p.writeJSON(docs)
		}
		return p.writeYAML(docs)
	}
	if len(rows) == 0 {
		return p.none("plugins")
	}
	t := table{header: []string{"WHERE", "KIND", "NAME", "VERSION", "STATE", "RESTARTS", "SINCE", "LAST ERROR"}}
	for _, r := range rows {
		s := r.Status
		t.add(r.Where(), s.GetKind(), s.GetName(), orDash(s.GetVersion()), orDash(s.GetState()),
			strconv.Itoa(int(s.GetRestarts())), age(p.now(), s.GetSince()), truncate(orDash(firstLine(s.GetLastError())), 60))
	}
	return p.writeTable(t)
}
