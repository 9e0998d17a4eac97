// Command unyo-check-crashy misbehaves on request, for supervisor tests and
// the agent's bad-plugin integration test.
//
// Target "mode" (per call): "crash" exits mid-call, "panic" panics in a
// goroutine of its own (which the SDK cannot recover, so the process dies
// with Go's panic message), "hang" stops the whole process (SIGSTOP: no
// answer, no probe), "leak" starts a child it never waits for and answers
// "OK leaked <pid>", "sleep" waits for the deadline, "env" answers with its
// environment, one variable a line, anything else answers OK.
//
// The binary's own name picks how it starts, so that one build installed
// as several unyo-check-<name> files gives plugins that misbehave before
// any call: "stdout" prints to stdout before the handshake, "silent" never
// handshakes, "garbage" handshakes to a socket that answers with bytes that
// are not gRPC, "crashloop" exits at once (as CRASHY_EXIT_AT_START=1 does).
//
// Installed as unyo-action-<name> it is an action plugin instead: param
// "mode" "panic" and "hang" misbehave as the check modes do, anything else
// succeeds.
//
// Config "reject": true fails Configure; env CRASHY_API=2 speaks only API
// v2; CRASHY_UNREADY=1 makes Probe not ready.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/go-plugin"

	"github.com/unyo-ops/unyo/plugins/base"
	"github.com/unyo-ops/unyo/plugins/sdk"
)

// common is what every kind of plugin answers.
type common struct{}

// crashy is the check plugin.
type crashy struct{ common }

// actor is the action plugin.
type actor struct{ common }

func (common) Info() sdk.Info {
	i := sdk.Info{Name: "crashy", Version: "0.0.1"}
	if os.Getenv("CRASHY_API") == "2" {
		i.APIVersions = []uint32{2}
	}
	return i
}
func (common) ConfigSchema() string { return "{}" }
func (common) Configure(_ context.Context, c map[string]any) error {
	if c["reject"] == true {
		return sdk.Invalid("reject", "was asked to reject")
	}
	return nil
}
func (common) Probe(context.Context) (bool, string) {
	if os.Getenv("CRASHY_UNREADY") == "1" {
		return false, "told to be unready"
	}
	return true, ""
}
func (crashy) Check(ctx context.Context, req sdk.CheckRequest) (sdk.CheckResult, error) {
	sdk.Log(ctx).Info("checking", "mode", req.Target["mode"])
	misbehave(ctx, req.Target["mode"])
	switch req.Target["mode"] {
	case "crash":
		os.Exit(7)
	case "leak":
		// Never waited for: the process group is all the host has on it.
		c := exec.Command("sleep", "3600")
		if err := c.Start(); err != nil {
			return sdk.CheckResult{}, err
		}
		return sdk.CheckResult{Status: sdk.OK, Output: fmt.Sprintf("OK leaked %d", c.Process.Pid)}, nil
	case "sleep":
		<-ctx.Done()
	case "print":
		fmt.Fprintln(os.Stderr, "stray stderr line")
	case "env":
		return sdk.CheckResult{Status: sdk.OK, Output: strings.Join(os.Environ(), "\n")}, nil
	}
	return sdk.CheckResult{Status: sdk.OK, Output: "OK " + strings.TrimSpace(fmt.Sprint(req.Target["mode"]))}, nil
}

func (actor) Execute(ctx context.Context, req sdk.ActionRequest, _ func(string)) sdk.Outcome {
	misbehave(ctx, req.Params["mode"])
	return sdk.Outcome{Status: sdk.Succeeded, Message: fmt.Sprintf("done %v", req.Params["mode"])}
}

// misbehave does what a check and an action do alike: "panic" panics
// where the SDK cannot recover it, "hang" stops the whole process.
func misbehave(ctx context.Context, mode any) {
	switch mode {
	case "panic":
		go func() { panic("crashy was told to panic") }()
		<-ctx.Done()
	case "hang":
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		<-ctx.Done()
	}
}

func main() {
	if strings.HasPrefix(filepath.Base(os.Args[0]), "unyo-action-") {
		sdk.Serve(actor{})
	}
	switch strings.TrimPrefix(filepath.Base(os.Args[0]), "unyo-check-") {
	case "stdout":
		fmt.Println("hello from a plugin that talks before its handshake")
	case "silent":
		select {} // the host's start timeout, or its death (Pdeathsig), ends this
	case "garbage":
		garbage()
		return
	case "crashloop":
		os.Exit(3)
	}
	if os.Getenv("CRASHY_EXIT_AT_START") == "1" {
		os.Exit(3)
	}
	sdk.Serve(crashy{})
}

// garbage completes go-plugin's handshake for a socket whose every
// connection gets bytes that are not HTTP/2.
func garbage() {
	ln, err := net.Listen("unix", filepath.Join(os.Getenv(plugin.EnvUnixSocketDir), "garbage.sock"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d|%d|unix|%s|grpc\n", plugin.CoreProtocolVersion, base.ProtocolVersion, ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() {
			defer c.Close()
			_, _ = c.Write([]byte("\x00\xffthis is not gRPC\r\n\r\n\x17\x03\x03 garbage garbage garbage\n"))
			_, _ = io.Copy(io.Discard, c)
		}()
	}
}
