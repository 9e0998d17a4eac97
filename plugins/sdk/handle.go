package sdk

import (
	"encoding/json"
	"fmt"
)

// NewHandle is a handle of the given layout version whose state is s as
// JSON (a provider's handleState struct).
func NewHandle(version uint32, s any) Handle {
	b, err := json.Marshal(s)
	if err != nil {
		// A handle state is a plain struct of strings and numbers; one
		// that does not marshal is a bug in the plugin.
		panic(fmt.Sprintf("sdk: handle state %T does not marshal: %v", s, err))
	}
	return Handle{Version: version, State: b}
}

// ReadHandle reads the state of a handle written by NewHandle with the
// given version: a handle of another version, state that is not JSON of
// S, or a state usable says is not (nil: any) is ErrBadHandle, worded for
// operators with the plugin's name. Recover starts with it.
func ReadHandle[S any](plugin string, h Handle, version uint32, usable func(S) bool) (S, error) {
	var s S
	if h.Version != version {
		return s, fmt.Errorf("provider %s: handle version %d (this plugin reads %d): %w", plugin, h.Version, version, ErrBadHandle)
	}
	if err := json.Unmarshal(h.State, &s); err != nil || (usable != nil && !usable(s)) {
		var zero S
		return zero, fmt.Errorf("provider %s: handle state is unreadable: %w", plugin, ErrBadHandle)
	}
	return s, nil
}
