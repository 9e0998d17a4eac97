// Package printer writes what the CLI lists and gets: as aligned tables for
// people, or as JSON or YAML for scripts.
//
// JSON prints a list as {"items": [...]}, each item in protojson form with
// the proto field names and its enums in the words the flags and tables use
// ("critical", not "LEVEL_CRITICAL"; manifest.ReadableEnums). YAML prints each item as its own document, in the
// same structure as the JSON item: a stream of documents is what
// `unyo apply -f` reads, so `unyo get checks -o yaml` can be applied again.
// Objects (checks, ...) print in that manifest shape in both formats.
//
// Tables show times as ages ("3m"); JSON and YAML keep absolute timestamps.
// Warnings about clusters that did not answer are printed separately by
// ClusterErrors, meant for stderr, so that they never mix with the output a
// script parses.
package printer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"gopkg.in/yaml.v3"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/printer/cell"
)

// Output formats.
const (
	Table = "table"
	JSON  = "json"
	YAML  = "yaml"
)

// CheckFormat fails for anything but table, json and yaml ("" is table),
// so that a command can reject a mistyped -o before doing any work.
func CheckFormat(format string) error {
	switch format {
	case "", Table, JSON, YAML:
		return nil
	}
	return fmt.Errorf("unknown output format %q (expected table, json or yaml)", format)
}

// printer carries what every output function needs; now is injectable so
// that tests can print ages against a fixed clock.
type printer struct {
	w      io.Writer
	format string
	now    func() time.Time
	// partial: some clusters did not answer, so an empty list may not be.
	partial bool
}

// Partial marks w as the output of an answer that some clusters did not
// give (when partial): an empty table then says it holds what the
// clusters that answered had, not that nothing exists.
func Partial(w io.Writer, partial bool) io.Writer {
	if partial {
		return partialWriter{w}
	}
	return w
}

type partialWriter struct{ io.Writer }

func newPrinter(w io.Writer, format string, now func() time.Time) (*printer, error) {
	if err := CheckFormat(format); err != nil {
		return nil, err
	}
	if format == "" {
		format = Table
	}
	p := &printer{w: w, format: format, now: now}
	if pw, ok := w.(partialWriter); ok {
		p.w, p.partial = pw.Writer, true
	}
	return p, nil
}

// Nodes prints nodes: in a table NAME, CLUSTER, STATE, CPUS, MEMORY, DISK,
// LABELS and LAST HEARTBEAT.
func Nodes(w io.Writer, format string, nodes []*unyov1.Node) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return p.nodes(nodes)
}

// Objects prints applied objects. JSON and YAML use the manifest shape
// (kind, name, cluster, labels, spec), so YAML output can be applied
// again; server-side fields such as the revision appear in tables only.
// A table per kind, in order of appearance.
func Objects(w io.Writer, format string, objs []*unyov1.Object) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return p.objects(objs)
}

// documents readies objects for printing as documents: the clusters'
// copies of an object root keeps for every cluster (origin "root") print
// once and without a cluster, so that applying the output again is the
// object for every cluster, not an override in each cluster.
func documents(objs []*unyov1.Object) []*unyov1.Object {
	out := make([]*unyov1.Object, 0, len(objs))
	seen := map[string]bool{}
	for _, o := range objs {
		if kinds.Origin(o) == kinds.OriginRoot {
			key := kinds.KindOf(o) + "/" + kinds.Name(o)
			if seen[key] {
				continue
			}
			seen[key] = true
			o = proto.Clone(o).(*unyov1.Object)
			kinds.SetCluster(o, "")
		}
		out = append(out, o)
	}
	return out
}

// Events prints check results: in a table NODE, CHECK, LEVEL, STATUS, AGE
// and the first line of the output.
func Events(w io.Writer, format string, events []*unyov1.Event) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return p.events(events)
}

// Clusters prints the clusters a root knows: in a table NAME, URL,
// REACHABLE, WATCHED-BY (root and the peers that watch it), PEER STATUS
// (what each of them saw), LAST SEEN (the last answer to any watcher or
// registration), and ERROR when a cluster has one.
func Clusters(w io.Writer, format string, clusters []*unyov1.ClusterInfo) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return p.clusters(clusters)
}

// Status prints what a server says about itself. It is one object, so
// JSON and YAML print it without an items list.
func Status(w io.Writer, format string, s *unyov1.GetStatusResponse) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return p.status(s)
}

// ApplyResults prints what apply or delete did, kubectl-like, one line per
// object: "Check/disk (dc1) created", "Check/load not found".
func ApplyResults(w io.Writer, results []*unyov1.ApplyResult) error {
	var b strings.Builder
	for _, r := range results {
		ref := r.GetRef()
		b.WriteString(clean(ref.GetKind() + "/" + ref.GetName()))
		if ref.GetCluster() != "" {
			b.WriteString(" (" + clean(ref.GetCluster()) + ")")
		}
		b.WriteString(" " + clean(r.GetAction()) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ClusterErrors warns about clusters that did not answer. Meant for
// stderr, in every format: the output on stdout is still valid (just
// incomplete) and must not be mixed with warnings.
func ClusterErrors(w io.Writer, errs []*unyov1.ClusterError) error {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "warning: cluster %s did not answer: %s\n", clean(e.GetCluster()), clean(e.GetError()))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (p *printer) nodes(nodes []*unyov1.Node) error {
	return printList(p, "nodes", nodes, func() table {
		// RESOURCE, RACK and ZONE are where root's inventory says the node
		// sits (all its topology labels show with -o yaml); "<none>": the
		// inventory has no entry for it.
		// SCHED is schedulable, cordoned or draining; CPUS, MEMORY and
		// DISK are reserved/capacity once computes hold any of the node.
		t := table{header: []string{"NAME", "CLUSTER", "STATE", "SCHED", "RESOURCE", "RACK", "ZONE", "CPUS", "MEMORY", "DISK", "LABELS", "VERSION", "LAST HEARTBEAT"}}
		for _, n := range nodes {
			c := n.GetCapacity()
			r := n.GetReserved()
			cpus := "-"
			if c.GetCpus() > 0 {
				cpus = fmt.Sprint(c.GetCpus())
			}
			memory, disk := humanBytes(c.GetMemoryBytes()), humanBytes(c.GetDiskBytes())
			if r != nil {
				cpus = fmt.Sprintf("%d/%s", r.GetCpus(), cpus)
				memory = humanBytes(r.GetMemoryBytes()) + "/" + memory
				disk = humanBytes(r.GetDiskBytes()) + "/" + disk
			}
			sched := "schedulable"
			switch {
			case n.GetDraining():
				sched = "draining"
			case n.GetCordoned():
				sched = "cordoned"
			}
			resource := n.GetResource()
			if resource == "" {
				resource = "<none>"
			}
			top := n.GetTopologyLabels()
			t.add(n.GetName(), orDash(n.GetCluster()), n.GetState().DisplayName(), sched,
				resource, orDash(top["topology.unyo.dev/rack"]), orDash(top["topology.unyo.dev/zone"]), cpus,
				memory, disk,
				cell.Labels(n.GetLabels(), "<none>"), orDash(n.GetAgentVersion()), age(p.now(), n.GetLastHeartbeat()))
		}
		return t
	})
}

func (p *printer) objects(objs []*unyov1.Object) error {
	if p.format == YAML || p.format == JSON {
		objs = documents(objs)
	}
	switch p.format {
	case YAML:
		return manifest.Encode(p.w, objs)
	case JSON:
		items := make([][]byte, len(objs))
		for i, o := range objs {
			b, err := manifest.MarshalJSON(o)
			if err != nil {
				return err
			}
			items[i] = b
		}
		return p.writeJSON(items)
	}
	if len(objs) == 0 {
		return p.none("objects")
	}
	var order []string
	byKind := map[string][]*unyov1.Object{}
	for _, o := range objs {
		k := kinds.KindOf(o)
		if byKind[k] == nil {
			order = append(order, k)
		}
		byKind[k] = append(byKind[k], o)
	}
	for i, k := range order {
		if i > 0 {
			if _, err := io.WriteString(p.w, "\n"); err != nil {
				return err
			}
		}
		if err := p.writeTable(objectTable(k, byKind[k], p.now())); err != nil {
			return err
		}
	}
	return nil
}

// objectTable lays out objects of one kind in the columns its
// registration declares; kinds without columns get the ones every kind
// has.
func objectTable(kind string, objs []*unyov1.Object, now time.Time) table {
	k, ok := builtin.Kinds().Lookup(kind)
	if !ok || len(k.Columns) == 0 {
		t := table{header: []string{"KIND", "NAME", "CLUSTER"}}
		for _, o := range objs {
			t.add(orDash(kinds.KindOf(o)), kinds.Name(o), orDash(kinds.Cluster(o)))
		}
		return t
	}
	var t table
	for _, c := range k.Columns {
		t.header = append(t.header, c.Header)
	}
	for _, o := range objs {
		m := kinds.Message(o)
		row := make([]string, len(k.Columns))
		for i, c := range k.Columns {
			row[i] = orDash(c.Cell(m, now))
			if c.Width > 0 {
				row[i] = truncate(row[i], c.Width)
			}
		}
		t.add(row...)
	}
	return t
}

func (p *printer) events(events []*unyov1.Event) error {
	return printList(p, "events", events, func() table {
		// ID is what `unyo events get` takes (a unique prefix will do);
		// CLUSTER tells apart the nodes of the same name in two clusters.
		t := table{header: []string{"ID", "CLUSTER", "NODE", "CHECK", "LEVEL", "STATUS", "AGE", "OUTPUT"}}
		for _, e := range events {
			at := e.GetStartedAt()
			if at == nil {
				at = e.GetReceivedAt()
			}
			output := firstLine(e.GetOutput())
			if e.GetTimedOut() {
				output = strings.TrimSpace("(timed out) " + output)
			}
			st := status(e.GetStatus())
			if e.GetStale() != "" {
				// The node stopped reporting: the last result is not its state now.
				st = "stale (was " + st + ")"
			}
			t.add(orDash(e.GetId()), orDash(e.GetCluster()), e.GetNode(), e.GetCheck(), level(e.GetLevel()), st,
				age(p.now(), at), truncate(orDash(output), 60))
		}
		return t
	})
}

func (p *printer) clusters(clusters []*unyov1.ClusterInfo) error {
	return printList(p, "clusters", clusters, func() table {
		t := table{header: []string{"NAME", "URL", "REACHABLE", "VERSION", "REGION", "DATACENTER", "WEIGHT", "WATCHED-BY", "PEER STATUS", "LAST SEEN"}}
		withErrors := slices.ContainsFunc(clusters, func(c *unyov1.ClusterInfo) bool { return c.GetError() != "" })
		if withErrors {
			t.header = append(t.header, "ERROR")
		}
		for _, c := range clusters {
			reachable := "no"
			if c.GetReachable() {
				reachable = "yes"
			}
			// Who watches the cluster, and what each saw: "root:ok b:down".
			var by, seen []string
			for _, o := range c.GetWatchedBy() {
				by = append(by, o.GetWatcher())
				seen = append(seen, o.GetWatcher()+":"+o.GetStatus())
			}
			row := []string{orDash(c.GetName()), orDash(c.GetUrl()), reachable, orDash(c.GetVersion())}
			row = append(row, clusterAttributes(c.GetAttributes())...)
			row = append(row, orDash(strings.Join(by, ",")), orDash(strings.Join(seen, " ")), age(p.now(), c.GetLastSeen()))
			if withErrors {
				row = append(row, truncate(orDash(c.GetError()), 80))
			}
			t.add(row...)
		}
		return t
	})
}

func (p *printer) status(s *unyov1.GetStatusResponse) error {
	if p.format != Table {
		b, err := marshal(s)
		if err != nil {
			return err
		}
		if p.format == JSON {
			return p.writeJSONDoc(b)
		}
		return p.writeYAML([][]byte{b})
	}
	leases := "-"
	if len(s.GetLeases()) > 0 {
		leases = strings.Join(s.GetLeases(), ",")
	}
	t := table{header: []string{"ROLE", "VERSION", "CLUSTER", "REPLICA", "LEASES", "UP"}}
	t.add(orDash(s.GetRole()), orDash(s.GetVersion()), orDash(s.GetCluster()), orDash(s.GetReplica()), leases, age(p.now(), s.GetStartedAt()))
	return p.writeTable(t)
}

// jsonOptions spell fields as in the proto (as operators write them in
// YAML) and print zero values too, so that a script reading an OK event
// finds "status": "ok" instead of no key at all.
var jsonOptions = protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}

// marshal is m's JSON as the CLI prints it: protojson with jsonOptions, its
// enums in the words the flags and tables use ("critical").
func marshal(m proto.Message) ([]byte, error) {
	b, err := jsonOptions.Marshal(m)
	if err != nil {
		return nil, err
	}
	return manifest.ReadableEnums(b, m.ProtoReflect().Descriptor())
}

// printList prints items as JSON, YAML or the table tab builds. what
// names the items for the "no ... found" note.
func printList[M proto.Message](p *printer, what string, items []M, tab func() table) error {
	switch p.format {
	case JSON, YAML:
		docs := make([][]byte, len(items))
		for i, m := range items {
			b, err := marshal(m)
			if err != nil {
				return err
			}
			docs[i] = b
		}
		if p.format == JSON {
			return p.writeJSON(docs)
		}
		return p.writeYAML(docs)
	}
	if len(items) == 0 {
		return p.none(what)
	}
	return p.writeTable(tab())
}

// none tells a person that the list is empty (scripts use json or yaml).
func (p *printer) none(what string) error {
	if p.partial {
		_, err := fmt.Fprintf(p.w, "No %s found in the clusters that answered.\n", what)
		return err
	}
	_, err := fmt.Fprintf(p.w, "No %s found.\n", what)
	return err
}

// writeJSON prints a list as {"items": [...]}.
func (p *printer) writeJSON(items [][]byte) error {
	var buf bytes.Buffer
	buf.WriteString(`{"items":[`)
	buf.Write(bytes.Join(items, []byte(",")))
	buf.WriteString("]}")
	return p.writeJSONDoc(buf.Bytes())
}

func (p *printer) writeJSONDoc(b []byte) error {
	// Re-indenting also normalizes protojson's deliberately unstable
	// whitespace.
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := p.w.Write(out.Bytes())
	return err
}

func (p *printer) writeYAML(items [][]byte) error {
	if len(items) == 0 {
		return nil // yaml.v3 refuses to close an encoder that wrote nothing
	}
	enc := yaml.NewEncoder(p.w)
	enc.SetIndent(2)
	for _, b := range items {
		n, err := manifest.JSONToYAML(b)
		if err != nil {
			return err
		}
		if err := enc.Encode(n); err != nil {
			return err
		}
	}
	return enc.Close()
}

type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (p *printer) writeTable(t table) error {
	w := tabwriter.NewWriter(p.w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, strings.Join(t.header, "\t"))
	for _, r := range t.rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = clean(c)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}

// NodeOperations prints, after a node's table, its providers (health and
// capacity as their fingerprints said), its drain and its automatic cordon
// and drain (`unyo nodes get`).
func NodeOperations(w io.Writer, nodes []*unyov1.Node) error {
	for _, n := range nodes {
		if ps := n.GetProviders(); len(ps) > 0 {
			fmt.Fprintf(w, "\nProviders of %s:\n", n.GetName())
			for _, p := range ps {
				health := "healthy"
				if !p.GetHealthy() {
					health = "unhealthy: " + orDash(p.GetReason())
				}
				c := p.GetCapacity()
				capacity := "capacity -"
				if c != nil {
					capacity = fmt.Sprintf("capacity cpus %d, memory %s, disk %s", c.GetCpus(), humanBytes(c.GetMemoryBytes()), humanBytes(c.GetDiskBytes()))
				}
				since := ""
				if t := p.GetSince(); t != nil {
					since = ", since " + t.AsTime().UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(w, "  %s: %s; %s%s\n", p.GetName(), health, capacity, since)
			}
		}
		if d := n.GetDrain(); d != nil {
			fmt.Fprintf(w, "\nDrain of %s: %s (by %s", n.GetName(), d.GetPhase(), orDash(d.GetBy()))
			if t := d.GetStartedAt(); t != nil {
				fmt.Fprintf(w, ", started %s", t.AsTime().UTC().Format(time.RFC3339))
			}
			if t := d.GetDeadline(); t != nil {
				fmt.Fprintf(w, ", deadline %s", t.AsTime().UTC().Format(time.RFC3339))
			}
			fmt.Fprintf(w, ", force %v", d.GetForce())
			if m := d.GetMaintenance(); m != "" {
				fmt.Fprintf(w, ", maintenance %s", m)
			}
			fmt.Fprintf(w, ")\n  %s\n", d.GetMessage())
		}
		if a := n.GetAuto(); a != nil {
			fmt.Fprintf(w, "Auto of %s: cordon after %s, drain after %s", n.GetName(), orDash(a.GetEffectiveCordonAfter()), orDash(a.GetEffectiveDrainAfter()))
			if a.GetCordoned() {
				fmt.Fprint(w, " (cordoned automatically)")
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}
