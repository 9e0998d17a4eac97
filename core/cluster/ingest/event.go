package ingest

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/checks"
	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Synthetic describes an event the cluster raises itself (a metric check's
// result, a node's liveness, a failed action, a plugin's state, a loss of
// events), which then goes through Ingest like an agent's result.
type Synthetic struct {
	Node, Check string
	// Status is the Nagios status; the level follows from it.
	Status unyov1.CheckStatus
	// UnknownLevel is the level of an UNKNOWN status; unset is Critical.
	UnknownLevel unyov1.Level
	// Output's first line is the event's output, the rest its long output.
	Output   string
	At       time.Time // when it happened
	Duration time.Duration
	Labels   map[string]string
}

// Event builds the event: a new id, started at At, the level its status
// means and the status as exit code, as a check's run would have it.
func (s Synthetic) Event() *unyov1.Event {
	out, long, _ := strings.Cut(s.Output, "\n")
	return &unyov1.Event{
		Id: NewID(), Node: s.Node, Check: s.Check,
		Level: checks.LevelFor(s.Status, s.UnknownLevel), Status: s.Status, ExitCode: int32(s.Status),
		Output: out, LongOutput: long,
		StartedAt: timestamppb.New(s.At), Duration: durationpb.New(s.Duration), Labels: s.Labels,
	}
}
