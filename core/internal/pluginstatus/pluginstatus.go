// Package pluginstatus converts a plugin host's view of its plugins into the
// API's PluginStatus, the form agents send with heartbeats and clusters
// report in their status, so `unyo plugin ls` reads both alike.
package pluginstatus

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/plugins/host"
)

// ToProto converts a host's statuses; nil when there are none.
func ToProto(st []host.Status) []*unyov1.PluginStatus {
	if len(st) == 0 {
		return nil
	}
	out := make([]*unyov1.PluginStatus, 0, len(st))
	for _, s := range st {
		p := &unyov1.PluginStatus{
			Kind: s.Kind, Name: s.Name, Version: s.Version, State: string(s.State),
			Restarts: int32(s.Restarts), LastError: s.LastError,
		}
		if !s.Since.IsZero() {
			p.Since = timestamppb.New(s.Since)
		}
		out = append(out, p)
	}
	return out
}
