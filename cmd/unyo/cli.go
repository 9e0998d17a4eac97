package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/printer"
)

// defaultServer is where `unyo dev` answers.
const defaultServer = "http://127.0.0.1:7400"

// globals are the flags every operator command shares.
type globals struct {
	server  string
	token   string
	caFile  string
	output  string
	timeout time.Duration
	// cl is the client connect made, for explain.
	cl *client.Clients
}

// cliHints name the CLI's settings in the errors its client explains.
var cliHints = client.Hints{Server: "--server or UNYO_SERVER", Token: "--token or UNYO_TOKEN", CAFile: "--ca-file or UNYO_CA_FILE", TLS: "--ca-file"}

func (g *globals) bind(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&g.server, "server", envOr("UNYO_SERVER", defaultServer), "unyo server URL (env UNYO_SERVER)")
	f.StringVar(&g.token, "token", os.Getenv("UNYO_TOKEN"), "bearer token (env UNYO_TOKEN)")
	// --ca was the first name of --ca-file; it is defined first so that
	// --ca-file's default (the environment) is the one that stays.
	f.StringVar(&g.caFile, "ca", "", "")
	_ = f.MarkDeprecated("ca", "use --ca-file") // the flag was just defined
	f.StringVar(&g.caFile, "ca-file", envOr("UNYO_CA_FILE", os.Getenv("UNYO_CA")), "PEM file of the CA that signs the https server's certificate, instead of the system's CAs (env UNYO_CA_FILE)")
	f.StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml")
	f.DurationVar(&g.timeout, "timeout", 30*time.Second, "how long to wait for the server")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// connect returns clients and a context bounded by --timeout.
func (g *globals) connect(cmd *cobra.Command) (*client.Clients, context.Context, context.CancelFunc, error) {
	if err := printer.CheckFormat(g.output); err != nil {
		return nil, nil, nil, err
	}
	cl, err := client.New(client.Options{URL: g.server, Token: g.token, TLS: client.TLSOptions{CAFile: g.caFile}, Hints: cliHints})
	if err != nil {
		return nil, nil, nil, err
	}
	g.cl = cl
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	return cl, ctx, cancel, nil
}

// contextWithTimeout bounds one call of a long-running command.
func contextWithTimeout(cmd *cobra.Command, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), d)
}

// explain rewords a request's error for the operator.
func (g *globals) explain(err error) error {
	if err == nil {
		return nil
	}
	if g.cl != nil {
		return g.cl.Explain(err)
	}
	return client.Explain(g.server, err)
}

// printed finishes a command that printed a fanned-out answer: printErr is
// the printer's error; then each cluster that did not answer is named on
// stderr, and the command fails when any did, since the output is incomplete.
func printed(cmd *cobra.Command, printErr error, errs []*unyov1.ClusterError) error {
	if printErr != nil {
		return printErr
	}
	printer.ClusterErrors(cmd.ErrOrStderr(), errs)
	if len(errs) > 0 {
		return fmt.Errorf("%d cluster(s) did not answer; the output above is incomplete", len(errs))
	}
	return nil
}
