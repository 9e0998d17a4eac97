package sdk

import (
	"errors"
	"strings"
	"testing"
)

// TestHandle: a handle written by NewHandle reads back; another version,
// state that is not JSON of the struct, or state the plugin finds
// unusable is ErrBadHandle naming the plugin.
func TestHandle(t *testing.T) {
	type state struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	usable := func(s state) bool { return s.ID != "" || s.Name != "" }
	good := NewHandle(2, state{ID: "c1", Name: "web-0"})
	got, err := ReadHandle("test", good, 2, usable)
	if err != nil || got != (state{ID: "c1", Name: "web-0"}) {
		t.Fatalf("ReadHandle of its own handle: %+v, %v", got, err)
	}
	for _, tc := range []struct {
		name string
		h    Handle
		want string
	}{
		{"other version", Handle{Version: 1, State: good.State}, "handle version 1 (this plugin reads 2)"},
		{"not JSON", Handle{Version: 2, State: []byte("garbage")}, "handle state is unreadable"},
		{"wrong shape", Handle{Version: 2, State: []byte(`{"id": 7}`)}, "handle state is unreadable"},
		{"unusable", NewHandle(2, state{}), "handle state is unreadable"},
		{"empty", Handle{Version: 2}, "handle state is unreadable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadHandle("test", tc.h, 2, usable)
			if !errors.Is(err, ErrBadHandle) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "provider test: ") {
				t.Errorf("ReadHandle = %+v, %v; want ErrBadHandle saying %q", got, err, tc.want)
			}
			if got != (state{}) {
				t.Errorf("a refused handle gave state %+v", got)
			}
		})
	}
	if _, err := ReadHandle[state]("test", good, 2, nil); err != nil {
		t.Errorf("ReadHandle without a usable check: %v", err)
	}
}
