// Package nagios parses the output of Nagios-compatible check plugins as the
// Nagios Plugins Development Guidelines define it
// (https://nagios-plugins.org/doc/guidelines.html): the exit status, the
// status text and long text, and the performance data with its threshold
// ranges.
//
// Parsing never fails as a whole: plugins are third-party programs and a
// monitoring system must still show whatever they printed, so malformed
// perfdata items are reported in Output.Errors while everything else is kept.
package nagios

import "strconv"

// Status is the service state a plugin reports through its exit code.
type Status int

// The four states of the guidelines, with their exit codes as values.
const (
	OK       Status = 0
	Warning  Status = 1
	Critical Status = 2
	Unknown  Status = 3
)

// String returns the state's name as Nagios prints it, e.g. "WARNING".
func (s Status) String() string {
	switch s {
	case OK:
		return "OK"
	case Warning:
		return "WARNING"
	case Critical:
		return "CRITICAL"
	case Unknown:
		return "UNKNOWN"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// StatusFromExit maps a plugin's exit code to its state. Codes 0 to 3 map
// directly; any other code (a crash, "command not found" 127, a signal, a
// negative code from a runner) is Unknown, as Nagios itself treats it: the
// plugin did not tell us the state.
func StatusFromExit(code int) Status {
	if code >= int(OK) && code <= int(Unknown) {
		return Status(code)
	}
	return Unknown
}
