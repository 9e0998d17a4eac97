package apihook

import "time"

// Formats of the request body.
const (
	FormatUnyo         = "unyo"
	FormatAlertmanager = "alertmanager"
	// FormatAlertmanagerPush posts PostableAlerts to an Alertmanager's
	// /api/v2/alerts, as Prometheus does.
	FormatAlertmanagerPush = "alertmanager_push"
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

	// DefaultResendInterval is how often format alertmanager_push sends a
	// firing alert again: Prometheus' --rules.alert.resend-delay.
	DefaultResendInterval = time.Minute
	// ValidResends is how many resend intervals a pushed firing alert is
	// valid for (its endsAt): Prometheus sends 4, so that Alertmanager
	// resolves an alert whose sender stopped, but not one resend late.
	ValidResends = 4
)

// Config is a compiled api_hook action. The rule compiler
// (eventrules.APIHook) validates the action and applies the schema's
// defaults; its fields map one to one onto the first five here.
type Config struct {
	// URL is an http or https URL.
	URL string
	// Format is FormatUnyo (also when empty), FormatAlertmanager or
	// FormatAlertmanagerPush.
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
	// ResendInterval is the action's repeat_interval: with
	// FormatAlertmanagerPush a firing alert's endsAt is ValidResends of
	// them after the check ran; 0 or less means DefaultResendInterval.
	ResendInterval time.Duration
	// BaseBackoff and MaxBackoff bound the waits between attempts; zero
	// means DefaultBaseBackoff and DefaultMaxBackoff. Tests shorten them.
	BaseBackoff, MaxBackoff time.Duration
}
