package main

import (
	"os"
	"testing"

	"github.com/unyo-ops/unyo/plugins/provider-libvirt/virttest"
)

func TestMain(m *testing.M) {
	cleanup := virttest.RunDirGuard()
	code := m.Run()
	cleanup()
	os.Exit(code)
}
