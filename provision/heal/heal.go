// Package heal holds the cluster's self-healing decisions (DESIGN.md,
// "Node operations and self-healing"): when a replica on a Down node is
// replaced elsewhere, when mass failure looks like a partition and stops
// replacement, and how a replica its provider failed is retried with
// backoff and moved after repeated failures on one node. It is pure: the
// caller passes the clock's reading; core/cluster/heal.go applies the
// decisions to the store.
package heal

import (
	"fmt"
	"slices"
	"time"
)

// Backoff of a replica whose provider failed it: the first retry after
// BackoffMin, doubling up to BackoffMax.
const (
	BackoffMin = 10 * time.Second
	BackoffMax = 5 * time.Minute
)

// MaxFailuresPerNode is how many failures in a row on one node make the
// replica be placed on another node instead of retried in place.
const MaxFailuresPerNode = 3

// Backoff is the wait before the retry that follows the n-th failure in a
// row (n >= 1): 10s, 20s, 40s, ... at most 5m.
func Backoff(n int) time.Duration {
	d := BackoffMin
	for i := 1; i < n && d < BackoffMax; i++ {
		d *= 2
	}
	return min(d, BackoffMax)
}

// Retry is a replica's record of failures on one node.
type Retry struct {
	Node     string
	Failures int
	NextAt   time.Time
}

// Failed is r after the provider failed the replica on node at now: the
// count restarts on another node, and the next attempt waits Backoff.
func Failed(r Retry, node string, now time.Time) Retry {
	if r.Node != node {
		r = Retry{Node: node}
	}
	r.Failures++
	r.NextAt = now.Add(Backoff(r.Failures))
	return r
}

// Action is what to do with a failed replica now.
type Action int

const (
	// Wait: the backoff has not passed.
	Wait Action = iota
	// RetryInPlace: remove the failed instance and place the replica
	// again, preferring the same node.
	RetryInPlace
	// Move: remove the failed instance and place the replica on another
	// node (MaxFailuresPerNode reached).
	Move
)

func (a Action) String() string {
	return [...]string{"wait", "retry in place", "move to another node"}[a]
}

// NextAttempt says what to do with a failed replica at now.
func NextAttempt(r Retry, now time.Time) Action {
	switch {
	case now.Before(r.NextAt):
		return Wait
	case r.Failures >= MaxFailuresPerNode:
		return Move
	default:
		return RetryInPlace
	}
}

// Avoid says whether a replica placed anew should keep off r.Node (it
// failed there too often), else r.Node is preferred.
func Avoid(r Retry) bool { return r.Failures >= MaxFailuresPerNode }

// Node is a node's liveness as self-healing sees it.
type Node struct {
	Name string
	Down bool
	// DownSince is when the node went silent (its last heartbeat); only
	// meaningful when Down.
	DownSince time.Time
}

// Partition is the partition guard's view of the cluster.
type Partition struct {
	// Suspected stops every replacement.
	Suspected bool
	// Down of Total nodes went Down within one window starting at Since.
	Down, Total int
	Since       time.Time
}

func (p Partition) String() string {
	if !p.Suspected {
		return fmt.Sprintf("no partition: %d/%d nodes Down", p.Down, p.Total)
	}
	return fmt.Sprintf("partition suspected: %d/%d nodes Down since %s; no replica is replaced until fewer than half are Down",
		p.Down, p.Total, p.Since.UTC().Format(time.RFC3339))
}

// Guard is the partition guard: when more than half of the cluster's
// nodes went Down within one window of each other, the cluster is more
// likely cut off from them than they all failed at once, and replacing
// their replicas would double them when the partition heals. Nodes that
// went Down far apart (slow attrition) do not add up. The guard clears as
// soon as enough of those nodes come back.
func Guard(nodes []Node, window time.Duration) Partition {
	p := Partition{Total: len(nodes)}
	var since []time.Time
	for _, n := range nodes {
		if n.Down {
			since = append(since, n.DownSince)
		}
	}
	slices.SortFunc(since, func(a, b time.Time) int { return a.Compare(b) })
	// The largest set of Down times within one window (two pointers).
	j := 0
	for i := range since {
		for since[i].Sub(since[j]) > window {
			j++
		}
		if n := i - j + 1; n > p.Down {
			p.Down, p.Since = n, since[j]
		}
	}
	p.Suspected = p.Total > 0 && 2*p.Down > p.Total
	return p
}

// Verdict is what to do with a placed replica given its node's liveness.
type Verdict int

const (
	// Keep: the node is not Down.
	Keep Verdict = iota
	// Waiting: the node is Down but not for replace_after yet, or the
	// replica never moves, or a partition is suspected; the replica shows
	// reason NodeDown.
	Waiting
	// Replace: release the replica and place it elsewhere.
	Replace
)

// Judge says what to do with a replica on node n at now. replaceAfter 0
// means never.
func Judge(n Node, replaceAfter time.Duration, p Partition, now time.Time) Verdict {
	switch {
	case !n.Down:
		return Keep
	case replaceAfter <= 0 || p.Suspected || now.Sub(n.DownSince) < replaceAfter:
		return Waiting
	default:
		return Replace
	}
}

// WaitingMessage is the words of a replica waiting on its Down node.
func WaitingMessage(n Node, replaceAfter time.Duration, p Partition) string {
	since := n.DownSince.UTC().Format(time.RFC3339)
	switch {
	case replaceAfter <= 0:
		return fmt.Sprintf("node %s is Down since %s; replace_after is never, so the replica waits for its node", n.Name, since)
	case p.Suspected:
		return fmt.Sprintf("node %s is Down since %s; not replaced: %s", n.Name, since, p)
	default:
		return fmt.Sprintf("node %s is Down since %s; replaced elsewhere at %s (replace_after %s)", n.Name, since,
			n.DownSince.Add(replaceAfter).UTC().Format(time.RFC3339), replaceAfter)
	}
}
