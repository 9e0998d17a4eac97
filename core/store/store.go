// Package store defines unyo's state store: one interface, backed by SQLite
// (the embedded default) or PostgreSQL, and checked by one contract suite
// (package storetest) that every backend passes.
package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
)

// ErrNotFound is returned (wrapped) when a named object does not exist.
var ErrNotFound = errors.New("not found")

// ErrReferenced is returned (wrapped in a *ReferencedError) when an object
// cannot be deleted because others still refer to it.
var ErrReferenced = errors.New("still referenced")

// Store is the state of one tier: a root uses clusters; a cluster uses nodes,
// checks and events. Both use leases.
type Store interface {
	Nodes
	Checks
	Objects
	Events
	Clusters
	Leases
	Rules
	Pipeline
	LogPositions
	Stats
	Credentials
	Tokens
	Audit
	Watched
	Addresses
	Computes
	Loadbalancers
	Close() error
}

// Credential kinds a store keeps.
const (
	// CredNode is a node's own credential, kept by its cluster.
	CredNode = "node"
	// CredNodeCert is the serial (hex) of a node's current client
	// certificate, signed by its cluster's node CA: replacing it renews,
	// deleting it revokes.
	CredNodeCert = "node-cert"
	// CredCluster is a cluster's credential, kept by root.
	CredCluster = "cluster"
	// CredRoot is root's credential, kept by a cluster.
	CredRoot = "root"
	// CredRootToCluster is the token root presents to the cluster it is
	// named by: root keeps it in Secret because it must send it.
	CredRootToCluster = "root-to-cluster"
	// CredPeerToken is the token the cluster it is named by presents to
	// the peers it watches, kept by root (in Secret) which hands it out.
	CredPeerToken = "peer-token"
	// CredPeer is the credential of a peer cluster (named) watching this
	// one, kept by the watched cluster as root last listed its watchers.
	CredPeer = "peer"
)

// Credential binds the SHA-256 (hex) of a token to who presents it.
type Credential struct {
	Kind string
	Name string
	Hash string
	// Secret is the token itself, kept only for CredRootToCluster.
	Secret    string
	CreatedAt time.Time
}

// Credentials are the credentials a server issued, one per kind and name.
type Credentials interface {
	// PutCredential binds c.Hash to c.Kind and c.Name, replacing what was
	// bound to them before (which stops working).
	PutCredential(ctx context.Context, c Credential) error
	// AddCredential is PutCredential that fails (wrapping ErrExists) when
	// kind and name have a credential already.
	AddCredential(ctx context.Context, c Credential) error
	// LookupCredential returns every credential with this hash (usually
	// one; root and a cluster sharing a database, as in unyo dev, both keep
	// root's token).
	LookupCredential(ctx context.Context, hash string) ([]Credential, error)
	// GetCredential returns the credential of kind and name; ErrNotFound if none.
	GetCredential(ctx context.Context, kind, name string) (Credential, error)
	// DeleteCredential revokes the credential of kind and name; no error
	// when there is none.
	DeleteCredential(ctx context.Context, kind, name string) error
	// ListCredentials returns every credential of kind, sorted by name.
	ListCredentials(ctx context.Context, kind string) ([]Credential, error)
	// CredentialsGeneration returns a number that moves with every change
	// to the credentials: two equal reads mean none was stored or revoked
	// in between.
	CredentialsGeneration(ctx context.Context) (int64, error)
}

// ErrExists is returned (wrapped) when something to be created exists.
var ErrExists = errors.New("already exists")

// LogPosition is the last line a cluster stored from one tailed file of a
// node: the agent's sequence number of the line and its byte offset.
type LogPosition struct {
	Sequence uint64
	Offset   int64
}

// LogPositions let a cluster drop log lines it stored before: lines an agent
// resends after a lost answer, or replays after a crash.
type LogPositions interface {
	// GetLogPositions returns the positions of node's files by file id.
	GetLogPositions(ctx context.Context, node string) (map[string]LogPosition, error)
	// PutLogPositions sets the positions of some of node's files.
	PutLogPositions(ctx context.Context, node string, pos map[string]LogPosition) error
	// PruneLogPositions forgets files not written since before, so that a
	// reused inode does not inherit an old file's position, and returns how
	// many it forgot.
	PruneLogPositions(ctx context.Context, before time.Time) (int, error)
}

// NodeBeat is a node's liveness as the store keeps it.
type NodeBeat struct {
	Name          string
	State         unyov1.NodeState
	LastHeartbeat time.Time // zero before the first heartbeat
}

// NodeFilter selects the nodes ListNodesMatching returns: those for which
// any of its set conditions holds (none set: no node). The cluster's
// per-second loops read only the few nodes they may act on this way, not
// every node of a 50,000-node fleet.
type NodeFilter struct {
	// NotReady: the node's state is not Ready.
	NotReady bool
	// Auto: the node has automatic cordon and drain settings or state of
	// its own (SetNodeAuto).
	Auto bool
	// Draining: a drain of the node is under way (its phase is Draining).
	Draining bool
}

// Nodes are the machines whose agents report to a cluster.
type Nodes interface {
	// UpsertNode registers a node or updates its description, keeping
	// registered_at from the first registration.
	UpsertNode(ctx context.Context, n *unyov1.Node) error
	// TouchNodes records heartbeats (node name -> time) in one write.
	TouchNodes(ctx context.Context, seen map[string]time.Time) error
	// SetNodeState changes a node's liveness state.
	SetNodeState(ctx context.Context, name string, state unyov1.NodeState) error
	// SetNodePlugins replaces the plugin statuses kept with a node, leaving
	// the rest of it (state included) as it is.
	SetNodePlugins(ctx context.Context, name string, plugins []*unyov1.PluginStatus) error
	// SetNodeProviders replaces the provider statuses kept with a node
	// (their fingerprints), leaving the rest; when a provider's health or
	// capacity changed it moves the node's generation, so that a placement
	// chosen before commits against the new facts.
	SetNodeProviders(ctx context.Context, name string, providers []*unyov1.ProviderStatus) error
	// SetNodeTopology replaces what root derived for a node from its
	// inventory (Node.resource, topology_labels, topology_reason), leaving
	// the rest; it says whether anything changed.
	SetNodeTopology(ctx context.Context, name string, t *unyov1.NodeTopology) (changed bool, err error)
	// NodeTopologyGeneration returns a number that moves whenever
	// SetNodeTopology changes a node: two equal reads mean no node's
	// topology changed in between.
	NodeTopologyGeneration(ctx context.Context) (int64, error)
	GetNode(ctx context.Context, name string) (*unyov1.Node, error)
	ListNodes(ctx context.Context) ([]*unyov1.Node, error)
	// ListNodesMatching returns the nodes f selects, sorted by name, as
	// ListNodes has them.
	ListNodesMatching(ctx context.Context, f NodeFilter) ([]*unyov1.Node, error)
	// ListNodeBeats returns nodes' liveness columns only, sorted by name:
	// what the liveness judge reads every second, without decoding each
	// node's description. With lateBefore zero it lists every node;
	// otherwise only those not Ready or last heard from before lateBefore.
	ListNodeBeats(ctx context.Context, lateBefore time.Time) ([]NodeBeat, error)
	// DeleteNode removes a node, its credential and its log positions;
	// ErrNotFound if it has neither record nor credential. Its events stay
	// as history.
	DeleteNode(ctx context.Context, name string) error
}

// PutResult says what PutCheck did.
type PutResult string

const (
	Created    PutResult = "created"
	Configured PutResult = "configured"
	Unchanged  PutResult = "unchanged"
)

// Checks are the centrally applied check definitions of a cluster: objects
// of kind Check, typed for the agents' configuration.
type Checks interface {
	// PutCheck creates or replaces a check by name. Any change (but not an
	// unchanged put) advances the checks revision.
	PutCheck(ctx context.Context, c *unyov1.Check) (PutResult, error)
	// DeleteCheck removes a check and advances the revision; ErrNotFound if absent.
	DeleteCheck(ctx context.Context, name string) error
	GetCheck(ctx context.Context, name string) (*unyov1.Check, error)
	ListChecks(ctx context.Context) ([]*unyov1.Check, error)
	// ChecksRevision changes whenever the set of checks does.
	ChecksRevision(ctx context.Context) (int64, error)
	// DeletedChecks are the checks deleted and not applied again since, by
	// name, with the time of their deletion: ingest drops the results of a
	// deleted check that were still in flight.
	DeletedChecks(ctx context.Context) (map[string]time.Time, error)
}

// Objects store what `unyo apply` sends, every kind (package kinds) in one
// table keyed by kind and name. The store maintains the fields revision,
// created_at and updated_at of kinds whose message has them, and keeps a
// count beside each object (rules' matched events, maintenances' silenced
// ones) that the pipeline adds to.
type Objects interface {
	// PutObjects creates or replaces every object in one transaction: all
	// of them are stored or none is. An error, or ctx ending (a client that
	// gave up), rolls the whole batch back, and readers never see part of
	// it. An object equal to the stored one but for the fields the store
	// maintains is Unchanged and writes nothing. The objects revision
	// advances at most once per call, and only when an object changed. The
	// results are in the order of objs.
	PutObjects(ctx context.Context, objs []*unyov1.Object) ([]PutResult, error)
	// ApplyObjects is PutObjects that also keeps the references between
	// objects, in the same transaction: each changed object's references
	// become opts.Refs of it (none without Refs); a reference to an object
	// neither stored nor in objs refuses the whole batch with a *RefError.
	// opts.Check then runs inside the transaction on the state the batch
	// leaves; its error stores nothing. Writes of objects are serialized,
	// so what Check reads cannot change before the commit.
	ApplyObjects(ctx context.Context, objs []*unyov1.Object, opts ApplyOptions) ([]PutResult, error)
	// GetObject returns one object; ErrNotFound if absent.
	GetObject(ctx context.Context, kind, name string) (*unyov1.Object, error)
	// ListObjects returns every object of kind, sorted by name.
	ListObjects(ctx context.Context, kind string) ([]*unyov1.Object, error)
	// DeleteObject removes an object, its count and its references,
	// advancing the revision; ErrNotFound if absent, a *ReferencedError
	// (ErrReferenced) while other objects refer to it.
	DeleteObject(ctx context.Context, kind, name string) error
	// Referrers returns the references made to an object, sorted by kind,
	// name and field.
	Referrers(ctx context.Context, kind, name string) ([]Referrer, error)
	// ObjectCounts returns the counts kept beside objects of kind, by name;
	// an object that was never counted is absent.
	ObjectCounts(ctx context.Context, kind string) (map[string]int64, error)
	// ObjectsRevision changes whenever an object of one of kinds does (put
	// or deleted); 0 before the first change.
	ObjectsRevision(ctx context.Context, kinds ...string) (int64, error)
}

// Ref is one reference an object makes (package kinds declares them).
type Ref = kinds.Reference

// Referrer is one reference made to an object.
type Referrer = kinds.Referrer

// ObjectReader reads objects and references, inside a transaction when
// given to ApplyOptions.Check.
type ObjectReader interface {
	GetObject(ctx context.Context, kind, name string) (*unyov1.Object, error)
	Referrers(ctx context.Context, kind, name string) ([]Referrer, error)
}

// ApplyOptions are what ApplyObjects does besides storing.
type ApplyOptions struct {
	// Refs returns the references an object makes.
	Refs func(o *unyov1.Object) []Ref
	// Check judges the state the batch leaves, read through r.
	Check func(ctx context.Context, r ObjectReader) error
	// DryRun does everything but commit: the results say what the apply
	// would do, and the transaction is rolled back.
	DryRun bool
}

// RefError is a reference to an object that does not exist.
type RefError struct {
	Kind, Name string // who refers
	Ref        Ref
}

func (e *RefError) Error() string {
	return fmt.Sprintf("%s %q: %s: no %s %q", e.Kind, e.Name, e.Ref.Field, e.Ref.Kind, e.Ref.Name)
}

// ReferencedError refuses the delete of an object others refer to, naming
// them.
type ReferencedError struct {
	Kind, Name string
	By         []Referrer
}

func (e *ReferencedError) Error() string {
	var names []string
	for _, r := range e.By {
		n := fmt.Sprintf("%s %q", r.Kind, r.Name)
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return fmt.Sprintf("%s %q is used by %s", e.Kind, e.Name, strings.Join(names, ", "))
}

func (e *ReferencedError) Unwrap() error { return ErrReferenced }

// EventFilter selects events; zero fields select everything.
type EventFilter struct {
	Node   string
	Check  string
	Levels []unyov1.Level
	// History lists every stored result (newest first) instead of the
	// latest per node and check.
	History bool
	Limit   int
}

// Events are check results: the latest per node/check and a bounded history.
type Events interface {
	// AppendEvents stores events whose ids are new and returns how many were
	// new; an id seen before is skipped, so a replay never doubles a result.
	// The latest state per node/check only moves forward in started_at.
	AppendEvents(ctx context.Context, events []*unyov1.Event) (inserted int, err error)
	GetEvent(ctx context.Context, id string) (*unyov1.Event, error)
	ListEvents(ctx context.Context, f EventFilter) ([]*unyov1.Event, error)
	// PruneEvents keeps the newest keep history entries per node/check and
	// returns how many it removed. The latest state is never pruned, nor
	// events the pipeline has not processed. With after > 0 only the pairs
	// that got events after seq after are looked at: pass the through of the
	// previous call, so that a pass costs what arrived since, not the whole
	// history. through is the pipeline cursor the pass pruned up to.
	PruneEvents(ctx context.Context, keep int, after int64) (removed int, through int64, err error)
	// ForgetEvents is what deleting a check or a node does to events, in
	// one transaction: the active alerts that f's node or check opened are
	// resolved (alerts.OpResolve, signed by, with reason), and its latest
	// events are removed with the pipeline's occurrence and reissue state
	// for them, so `events ls` no longer shows it. History stays. It
	// returns the alerts it resolved.
	ForgetEvents(ctx context.Context, f ForgetFilter, by, reason string, at time.Time) ([]*unyov1.Alert, error)
	// ForgetRevision moves with every ForgetEvents: a running pipeline
	// that sees it move reloads its state, so what it kept in memory of
	// a deleted node or check is forgotten there too.
	ForgetRevision(ctx context.Context) (int64, error)
}

// ForgetFilter names what ForgetEvents forgets: every check of a node,
// every node's results of a check, or (both set) one node/check. At least
// one is set.
type ForgetFilter struct {
	Node, Check string
}

// Clusters are the clusters a root knows.
type Clusters interface {
	UpsertCluster(ctx context.Context, c *unyov1.ClusterInfo) error
	ListClusters(ctx context.Context) ([]*unyov1.ClusterInfo, error)
	GetCluster(ctx context.Context, name string) (*unyov1.ClusterInfo, error)
	// DeleteCluster forgets a cluster and the credentials root keeps for
	// it (CredCluster, CredRootToCluster, CredPeerToken); ErrNotFound if
	// root knows neither.
	DeleteCluster(ctx context.Context, name string) error
}

// PipelineLag is how far a cluster's event pipeline is behind its ingest.
type PipelineLag struct {
	// Behind counts the stored events not yet processed.
	Behind int64
	// OldestReceived is when the oldest of them was received; zero when
	// none is behind.
	OldestReceived time.Time
}

// Watched is what a cluster's watchers judge it by (package peerwatch),
// the same whichever replica answers.
type Watched interface {
	// LeaseHolder returns who holds the named lease and until when; ""
	// when nobody does or the lease expired.
	LeaseHolder(ctx context.Context, name string) (holder string, expires time.Time, err error)
	PipelineLag(ctx context.Context) (PipelineLag, error)
	// NoteResultsAccepted records that agents' results were accepted at
	// at, keeping the latest time noted by any replica.
	NoteResultsAccepted(ctx context.Context, at time.Time) error
	// ResultsAcceptedAt returns the latest time noted; zero if none.
	ResultsAcceptedAt(ctx context.Context) (time.Time, error)
}

// Leases let one of several server replicas on a shared database run a
// controller loop at a time.
type Leases interface {
	// TryAcquireLease takes or renews the named lease for holder for ttl and
	// reports whether holder has it now. An expired lease can be taken by anyone.
	TryAcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// ReleaseLease gives the lease up if holder has it.
	ReleaseLease(ctx context.Context, name, holder string) error
}
