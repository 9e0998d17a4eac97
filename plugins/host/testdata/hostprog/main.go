// Command hostprog starts one plugin through the host package, prints the
// plugin's pid and then waits to be killed: the test kills it with SIGKILL
// and checks that the plugin does not outlive it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/unyo-ops/unyo/plugins/host"
)

func main() {
	h, err := host.New(host.Config{AllowUnpinned: true, Plugins: []host.PluginConfig{{Kind: "check", Name: "crashy", Path: os.Args[1]}}})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if err := h.Start(context.Background()); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	p, _ := h.Plugin("check", "crashy")
	fmt.Println(p.PID())
	select {}
}
