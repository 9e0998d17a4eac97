// Package peerwatch is inter-cluster monitoring's judgement, pure: which
// clusters watch which (a ring root assigns), and what a watcher makes of
// its looks at one cluster — reachable or not and for how long, and
// whether the cluster that answers is stuck (no controller, a pipeline
// behind, no agent results). A cluster that is down cannot report its own
// death; its peers raise the events, in their own pipelines, and root shows
// what every watcher saw. The clock is the caller's.
package peerwatch

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Check is the check name of the events a watcher raises about a peer; the
// event's node is the watched cluster's name.
const Check = "cluster-peer"

// RootWatcher is the watcher name of root's own observations.
const RootWatcher = "root"

// DefaultPeers is how many clusters each cluster watches (fewer when there
// are not that many others).
const DefaultPeers = 2

// The statuses of an observation.
const (
	StatusUnknown     = "unknown"     // not looked at yet
	StatusOK          = "ok"          // answers, and is not stuck
	StatusUnreachable = "unreachable" // does not answer, not yet for Thresholds.Unreachable
	StatusDown        = "down"        // does not answer for longer than Thresholds.Unreachable
	StatusStuck       = "stuck"       // answers, but a threshold below is passed
)

// Thresholds say when a watched cluster is down or stuck.
type Thresholds struct {
	// Unreachable: not answering for longer is down (critical); shorter is
	// a warning. No replica holding the controller lease for longer is
	// stuck.
	Unreachable time.Duration
	// Lag: the oldest event not yet through the pipeline older than this
	// is stuck.
	Lag time.Duration
	// Ingest: no agent result accepted for longer, while the cluster has
	// nodes and checks, is stuck.
	Ingest time.Duration
}

// DefaultThresholds are used for the zero fields of Thresholds.
var DefaultThresholds = Thresholds{Unreachable: 30 * time.Second, Lag: 2 * time.Minute, Ingest: 10 * time.Minute}

// WithDefaults fills t's zero fields from DefaultThresholds.
func (t Thresholds) WithDefaults() Thresholds {
	if t.Unreachable <= 0 {
		t.Unreachable = DefaultThresholds.Unreachable
	}
	if t.Lag <= 0 {
		t.Lag = DefaultThresholds.Lag
	}
	if t.Ingest <= 0 {
		t.Ingest = DefaultThresholds.Ingest
	}
	return t
}

// Assign is the ring root assigns: the clusters sorted by name, each
// watching the next n (wrapping round), at most all the others. With two
// or more clusters every cluster is watched by min(n, clusters-1) peers.
// It returns the watched clusters per watcher.
func Assign(names []string, n int) map[string][]string {
	ring := slices.Clone(names)
	slices.Sort(ring)
	ring = slices.Compact(ring)
	n = min(n, len(ring)-1)
	out := make(map[string][]string, len(ring))
	for i, w := range ring {
		for k := 1; k <= n; k++ {
			out[w] = append(out[w], ring[(i+k)%len(ring)])
		}
	}
	return out
}

// WatchersOf returns who watches cluster in an assignment, sorted.
func WatchersOf(assigned map[string][]string, cluster string) []string {
	var ws []string
	for w, watched := range assigned {
		if slices.Contains(watched, cluster) {
			ws = append(ws, w)
		}
	}
	slices.Sort(ws)
	return ws
}

// Look is one look at a watched cluster: its answer, or why there was none.
type Look struct {
	At     time.Time
	Err    error                 // it did not answer
	Health *unyov1.ClusterHealth // what it answered (nil from an older cluster)
}

// Verdict is what a watcher makes of a look.
type Verdict struct {
	Status string
	// CheckStatus is the status of the event raised: OK, WARNING while
	// unreachable but not yet down, CRITICAL when down or stuck.
	CheckStatus unyov1.CheckStatus
	Message     string
}

// Watch is what a watcher remembers of one cluster between looks.
type Watch struct {
	Cluster string
	// LastSeen is when the cluster last answered; zero: not since the
	// watch began.
	LastSeen time.Time
	// since is when the cluster stopped answering, or began to be watched
	// (a cluster never seen counts as not answering since then).
	since time.Time
	// noLease is since when the cluster answered with no controller.
	noLease time.Time
	// Checked and Last are the last look's time and verdict.
	Checked time.Time
	Last    Verdict
}

// NewWatch starts watching a cluster at now.
func NewWatch(cluster string, now time.Time) *Watch {
	return &Watch{Cluster: cluster, since: now, Last: Verdict{Status: StatusUnknown, Message: "not checked yet"}}
}

// Observe judges a look against th and remembers it.
func (w *Watch) Observe(l Look, th Thresholds) Verdict {
	th = th.WithDefaults()
	w.Checked = l.At
	v := w.judge(l, th)
	w.Last = v
	return v
}

func (w *Watch) judge(l Look, th Thresholds) Verdict {
	if l.Err == nil && l.Health.GetError() != "" {
		l.Err = fmt.Errorf("it answers but cannot read its own state: %s", l.Health.GetError())
	}
	if l.Err != nil {
		if !w.LastSeen.IsZero() && w.LastSeen.After(w.since) {
			w.since = w.LastSeen // it answered since: silence counts from then
		}
		silent := l.At.Sub(w.since)
		if silent > th.Unreachable {
			return Verdict{StatusDown, unyov1.CheckStatus_CHECK_STATUS_CRITICAL,
				fmt.Sprintf("cluster %s has not answered for %s (down after %s)%s: %v", w.Cluster, round(silent), th.Unreachable, seen(w.LastSeen), l.Err)}
		}
		return Verdict{StatusUnreachable, unyov1.CheckStatus_CHECK_STATUS_WARNING,
			fmt.Sprintf("cluster %s has not answered for %s (down after %s)%s: %v", w.Cluster, round(silent), th.Unreachable, seen(w.LastSeen), l.Err)}
	}
	w.LastSeen, w.since = l.At, l.At
	h := l.Health
	if h == nil {
		return Verdict{StatusOK, unyov1.CheckStatus_CHECK_STATUS_OK, fmt.Sprintf("cluster %s answers (it reports no health: an older version)", w.Cluster)}
	}
	var stuck []string
	if h.GetLeaseHolder() == "" {
		if w.noLease.IsZero() {
			w.noLease = l.At
		}
		if d := l.At.Sub(w.noLease); d > th.Unreachable {
			stuck = append(stuck, fmt.Sprintf("no replica has held the controller lease for %s (threshold %s)", round(d), th.Unreachable))
		}
	} else {
		w.noLease = time.Time{}
	}
	if lag := h.GetPipelineLag().AsDuration(); h.GetPipelineBehind() > 0 && lag > th.Lag {
		stuck = append(stuck, fmt.Sprintf("its pipeline is %d events behind, the oldest received %s ago (threshold %s)", h.GetPipelineBehind(), round(lag), th.Lag))
	}
	if age := h.GetIngestAge(); age != nil && h.GetNodes() > 0 && h.GetChecks() > 0 && age.AsDuration() > th.Ingest {
		stuck = append(stuck, fmt.Sprintf("it accepted no agent result for %s (threshold %s) though it has %d nodes and %d checks", round(age.AsDuration()), th.Ingest, h.GetNodes(), h.GetChecks()))
	}
	if len(stuck) > 0 {
		return Verdict{StatusStuck, unyov1.CheckStatus_CHECK_STATUS_CRITICAL, fmt.Sprintf("cluster %s answers but is stuck: %s", w.Cluster, strings.Join(stuck, "; "))}
	}
	return Verdict{StatusOK, unyov1.CheckStatus_CHECK_STATUS_OK, fmt.Sprintf("cluster %s answers: %s", w.Cluster, summary(h))}
}

// summary describes a healthy cluster's health in a few words.
func summary(h *unyov1.ClusterHealth) string {
	parts := []string{"controller " + orNone(h.GetLeaseHolder()), fmt.Sprintf("pipeline %d behind", h.GetPipelineBehind())}
	if a := h.GetIngestAge(); a != nil {
		parts = append(parts, fmt.Sprintf("last agent result %s ago", round(a.AsDuration())))
	}
	return strings.Join(parts, ", ")
}

// The labels of a watcher's event about a cluster: with the event's level,
// output and time they are the watcher's observation, kept in its store
// (see ObservationOf), so that every replica of the watcher tells it.
const (
	LabelWatcher  = "watcher"
	LabelStatus   = "peer_status"
	LabelLastSeen = "peer_last_seen"
)

// Labels are the labels of the event raised after the last look.
func (w *Watch) Labels(watcher string) map[string]string {
	l := map[string]string{LabelWatcher: watcher, LabelStatus: w.Last.Status}
	if !w.LastSeen.IsZero() {
		l[LabelLastSeen] = w.LastSeen.UTC().Format(time.RFC3339Nano)
	}
	return l
}

// ObservationOf reads a watcher's observation back from its latest event
// about the cluster.
func ObservationOf(e *unyov1.Event) *unyov1.PeerObservation {
	o := &unyov1.PeerObservation{Cluster: e.GetNode(), Watcher: e.GetLabels()[LabelWatcher], Status: e.GetLabels()[LabelStatus],
		Level: e.GetLevel(), Message: e.GetOutput(), CheckedAt: e.GetStartedAt()}
	if t, err := time.Parse(time.RFC3339Nano, e.GetLabels()[LabelLastSeen]); err == nil {
		o.LastSeen = timestamppb.New(t)
	}
	if o.Status == "" {
		o.Status = StatusUnknown
	}
	return o
}

// Observation is the watch as the API shows it, for a watcher's name.
func (w *Watch) Observation(watcher string) *unyov1.PeerObservation {
	o := &unyov1.PeerObservation{Cluster: w.Cluster, Watcher: watcher, Status: w.Last.Status, Message: w.Last.Message}
	if w.Last.Status != StatusUnknown {
		o.Level = checks.LevelFor(w.Last.CheckStatus, unyov1.Level_LEVEL_UNSPECIFIED)
	}
	if !w.LastSeen.IsZero() {
		o.LastSeen = timestamppb.New(w.LastSeen)
	}
	if !w.Checked.IsZero() {
		o.CheckedAt = timestamppb.New(w.Checked)
	}
	return o
}

func seen(t time.Time) string {
	if t.IsZero() {
		return ", not seen since the watch began"
	}
	return ", last seen " + t.UTC().Format(time.RFC3339)
}

func round(d time.Duration) time.Duration { return d.Round(time.Second) }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
