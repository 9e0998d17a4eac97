// Package footprint keeps the agent, which runs on every node of a fleet,
// small: the resident pages of the one unyo binary that only starting up
// needed, and the agent's Go heap.
//
// Every role runs every package's init, so starting touches pages all
// over the binary's code and read-only data (the servers' VictoriaMetrics,
// VictoriaLogs, ClickHouse and SQL packages included), and Linux maps
// them whole large folios at a time: an agent counted 48 MiB of the
// binary resident against 10 MiB of its own memory. Go cannot defer a
// package's init, so instead the agent gives those clean, file-backed
// pages back once it has started; the ones it goes on using fault back in
// from the page cache.
package footprint

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// AgentGCPercent is the agent's GOGC unless the environment sets one: its
// heap grows to 1.5 times what is live between collections instead of 2
// times. An agent running 20 checks, system metrics and a tailed log has
// about 4 MiB live (most of it what every package's init keeps), so this
// saves about 2 MiB for a collection every few seconds instead of every
// ten or so. A memory limit (GOMEMLIMIT) is not set: the agent's result
// buffer may lawfully hold 32 MiB while its spool cannot be written, and
// a limit below that would have the collector run without end.
const AgentGCPercent = 50

// Agent applies the agent's memory settings: the collector's default and
// giving back the executable's start-up pages (Release).
func Agent(log *slog.Logger) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(AgentGCPercent)
	}
	Release(log)
}

// Release gives back the executable's pages touched so far
// (ReleaseExecutable) and logs what it released. Called at steps of
// starting up, it keeps the high-water mark at the larger of the steps'
// pages instead of their sum.
func Release(log *slog.Logger) {
	n, err := ReleaseExecutable()
	if err != nil {
		log.Debug("could not release the binary's start-up pages", "err", err)
		return
	}
	log.Debug("released the binary's start-up pages", "bytes", n)
}
