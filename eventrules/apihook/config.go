package apihook

import "time"

// Formats of the request body.
const (
	FormatUnyo         = "unyo"
	FormatAlertmanager = "alertmanager"
)

// Defaults and limits.
const (
	// DefaultTimeout is the schema's default per attempt, for a Config
	// whose Timeout is unset.
	DefaultTimeout = 10 * time.Second

	DefaultBaseBackoff = 500 * time.Millisecond
	DefaultMaxBackoff  = 30 * time.Second

	// MaxResponseBytes is how much of a response body is read (and
	// discarded: only the status is kept), so a receiver cannot hold a
	// delivery by streaming.
	MaxResponseBytes = 4 << 10

	UserAgent = "unyo"
)

// Config is a compiled api_hook action. The rule compiler
// (eventrules.APIHook) validates the action and applies the schema's
// defaults; its fields map one to one onto the first five here.
type Config struct {
	// URL is an http or https URL.
	URL string
	// Format is FormatUnyo (also when empty) or FormatAlertmanager.
	Format string
	// Timeout bounds each attempt, response included; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Retries is the number of attempts after the first; 0 means none
	// (the schema's default of 3 is the rule compiler's to apply).
	Retries int
	// Headers are added to every request, such as Authorization. They
	// cannot replace Content-Type or Idempotency-Key: Send sets those last.
	Headers map[string]string

	// ExternalURL is the address of unyo's console, sent as the
	// Alertmanager payload's externalURL and generatorURL; may be empty.
	ExternalURL string
	// BaseBackoff and MaxBackoff bound the waits between attempts; zero
	// means DefaultBaseBackoff and DefaultMaxBackoff. Tests shorten them.
	BaseBackoff, MaxBackoff time.Duration
}
