package sdk

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/unyo-ops/unyo/plugins/base"
)

const (
	// parentPoll is how often a plugin checks that its host is alive.
	parentPoll = 250 * time.Millisecond
	// orphanGrace bounds cleanup when the host died or sent SIGTERM: nobody
	// is waiting for answers any more.
	orphanGrace = 2 * time.Second
)

// Serve runs p as a plugin and does not return: it exits 0 after a clean
// shutdown, 1 when it cannot serve. With the single argument "describe" it
// prints Describe(p) and exits 0 without any handshake.
func Serve(p Plugin) {
	if len(os.Args) == 2 && os.Args[1] == "describe" {
		out, err := Describe(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(string(out))
		os.Exit(0)
	}
	if len(Kinds(p)) == 0 {
		fmt.Fprintf(os.Stderr, "plugin %s implements no kind (CheckPlugin, ActionPlugin or ProviderPlugin)\n", p.Info().Name)
		os.Exit(1)
	}
	// Created before go-plugin swaps os.Stderr for its stdio pipe, so log
	// lines go to the real stderr, which the host parses and relays.
	log := hclog.New(&hclog.LoggerOptions{JSONFormat: true, Level: hclog.Trace, Output: os.Stderr})
	rt := newRuntime(p, log)
	go watchParent(rt)
	go watchSignals(rt)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: base.Handshake(),
		Plugins:         base.ServerPluginSet(rt.servers()),
		Logger:          log,
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			s := grpc.NewServer(append(opts, rt.serverOptions()...)...)
			rt.stopServer = func() { stopGracefully(s) }
			return s
		},
	})
	// go-plugin returns once the gRPC server stopped: after Shutdown, or
	// when the host closed the connection (its Kill). Close must still run.
	rt.shutdown(orphanGrace, "server stopped")
	os.Exit(0)
}

// watchParent exits when the host dies. Pdeathsig set by the host covers
// Linux; this covers the rest, and hosts that started us through a wrapper
// (they name themselves in UNYO_PLUGIN_PARENT_PID).
func watchParent(rt *runtime) {
	ppid := os.Getppid()
	named, _ := strconv.Atoi(os.Getenv(base.EnvParentPID))
	t := time.NewTicker(parentPoll)
	defer t.Stop()
	for range t.C {
		gone := os.Getppid() != ppid
		if !gone && named > 0 && named != ppid {
			gone = syscall.Kill(named, 0) == syscall.ESRCH
		}
		if gone {
			rt.log.Warn("host process is gone; exiting")
			rt.shutdown(orphanGrace, "host died")
			os.Exit(0)
		}
	}
}

func watchSignals(rt *runtime) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	<-ch
	rt.shutdown(orphanGrace, "SIGTERM")
	os.Exit(0)
}

// InProcess serves p without go-plugin or a child process, on a unix
// socket in dir; for tests and the conformance harness. Dial it with
// grpc.NewClient("unix://"+Socket). Stop shuts it down like Shutdown would.
type InProcess struct {
	Socket string
	rt     *runtime
	srv    *grpc.Server
	done   chan struct{}
}

// ServeInProcess starts p in this process.
func ServeInProcess(p Plugin, dir string, log hclog.Logger) (*InProcess, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	sock := filepath.Join(dir, "plugin.sock")
	lis, err := (&net.ListenConfig{}).Listen(context.Background(), "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: cannot listen on %s: %w", p.Info().Name, sock, err)
	}
	rt := newRuntime(p, log)
	srv := grpc.NewServer(rt.serverOptions()...)
	rt.stopServer = func() { stopGracefully(srv) }
	rt.servers().Register(srv)
	ip := &InProcess{Socket: sock, rt: rt, srv: srv, done: make(chan struct{})}
	go func() {
		defer close(ip.done)
		_ = srv.Serve(lis)
	}()
	return ip, nil
}

// Exited is closed when the server stopped (after Stop or a Shutdown call).
func (ip *InProcess) Exited() <-chan struct{} { return ip.done }

// Stop shuts the plugin down within grace and waits for it.
func (ip *InProcess) Stop(grace time.Duration) {
	ip.rt.shutdown(grace, "stopped")
	<-ip.done
	_ = os.Remove(ip.Socket)
}

// stopGracefully lets answered calls (Shutdown's own reply) flush, but does
// not wait for long-lived streams such as go-plugin's stdio stream, which
// only end when the host disconnects.
func stopGracefully(s *grpc.Server) {
	done := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.Stop()
	}
}
