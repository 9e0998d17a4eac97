package base

import (
	"strings"
	"testing"

	pluginv1 "github.com/unyo-ops/unyo/plugins/proto/unyo/plugin/v1"
)

func TestNegotiate(t *testing.T) {
	v, err := Negotiate([]uint32{1, 2, 3}, []uint32{2, 3, 4})
	if err != nil || v != 3 {
		t.Fatalf("Negotiate = %d, %v; want 3", v, err)
	}
	_, err = Negotiate([]uint32{2, 1}, []uint32{3})
	if err == nil {
		t.Fatal("no common version accepted")
	}
	for _, want := range []string{"host supports v1, v2", "plugin supports v3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := Negotiate([]uint32{1}, nil); err == nil || !strings.Contains(err.Error(), "plugin supports none") {
		t.Errorf("empty plugin list: %v", err)
	}
}

func TestPluginSets(t *testing.T) {
	if got := len(ClientPluginSet()); got != 4 {
		t.Errorf("client set has %d entries, want 4", got)
	}
	set := ServerPluginSet(Servers{Plugin: pluginv1.UnimplementedPluginServer{}, Check: pluginv1.UnimplementedCheckServer{}})
	if _, ok := set[NameCheck]; !ok || len(set) != 2 {
		t.Errorf("server set = %v, want plugin and check", set)
	}
	for _, k := range []pluginv1.Kind{pluginv1.Kind_KIND_CHECK, pluginv1.Kind_KIND_ACTION, pluginv1.Kind_KIND_PROVIDER} {
		if got, ok := ParseKind(KindName(k)); !ok || got != k {
			t.Errorf("kind %v does not round-trip", k)
		}
	}
}
