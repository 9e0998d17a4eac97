// Package convert holds the conversions between the API's protobuf
// messages and the types of unyo's stores and plugin host, in one place for
// the cluster that answers with them, the root that merges its clusters'
// answers, and the agent.
package convert

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/logstore"
	"github.com/unyo-ops/unyo/core/tsdb"
	"github.com/unyo-ops/unyo/plugins/host"
)

// Time is ts as a time, zero when ts is unset (AsTime would give 1970).
func Time(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// QueryFromProto converts an API filter to a log store query.
func QueryFromProto(f *unyov1.LogFilter) logstore.Query {
	return logstore.Query{
		Since: Time(f.GetSince()), Until: Time(f.GetUntil()),
		Host: f.GetHost(), App: f.GetApp(), TraceID: f.GetTraceId(),
		Levels: f.GetLevels(), Grep: f.GetGrep(), Fields: f.GetFields(), Limit: int(f.GetLimit()),
	}
}

// EntryFromProto converts an agent's line; host and cluster are the
// cluster's to set, so an agent cannot write lines in another node's name.
func EntryFromProto(e *unyov1.LogEntry, node, cluster string) logstore.Entry {
	return logstore.Entry{
		Time: Time(e.GetTime()), Host: node, App: e.GetApp(), Level: e.GetLevel(), TraceID: e.GetTraceId(),
		Message: e.GetMessage(), Fields: e.GetFields(), Cluster: cluster,
	}
}

// EntriesToProto converts stored entries for the API.
func EntriesToProto(entries []logstore.Entry) []*unyov1.LogEntry {
	out := make([]*unyov1.LogEntry, len(entries))
	for i, e := range entries {
		out[i] = &unyov1.LogEntry{
			Time: timestamppb.New(e.Time), Host: e.Host, App: e.App, Level: e.Level, TraceId: e.TraceID,
			Message: e.Message, Fields: e.Fields, Cluster: e.Cluster,
		}
	}
	return out
}

// BucketsToProto converts stats buckets for the API.
func BucketsToProto(buckets []logstore.Bucket) []*unyov1.LogBucket {
	out := make([]*unyov1.LogBucket, len(buckets))
	for i, b := range buckets {
		out[i] = &unyov1.LogBucket{Start: timestamppb.New(b.Start), Key: b.Key, Count: b.Count, Errors: b.Errors, Warnings: b.Warnings}
	}
	return out
}

// BucketsFromProto converts API buckets back, for merging and printing.
func BucketsFromProto(buckets []*unyov1.LogBucket) []logstore.Bucket {
	out := make([]logstore.Bucket, len(buckets))
	for i, b := range buckets {
		out[i] = logstore.Bucket{Start: b.GetStart().AsTime(), Key: b.GetKey(), Count: b.GetCount(), Errors: b.GetErrors(), Warnings: b.GetWarnings()}
	}
	return out
}

// SeriesToProto converts query results for the API.
func SeriesToProto(series []tsdb.Series) []*unyov1.Series {
	out := make([]*unyov1.Series, 0, len(series))
	for _, sr := range series {
		p := &unyov1.Series{Labels: sr.Labels, Points: make([]*unyov1.Point, len(sr.Points))}
		for i, pt := range sr.Points {
			p.Points[i] = &unyov1.Point{TimeMs: pt.T.UnixMilli(), Value: pt.V}
		}
		out = append(out, p)
	}
	return out
}

// PluginStatuses converts a plugin host's view of its plugins into the
// form agents send with heartbeats and clusters report in their status, so
// `unyo plugin ls` reads both alike; nil when there are none.
func PluginStatuses(st []host.Status) []*unyov1.PluginStatus {
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
