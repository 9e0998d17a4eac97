package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"gopkg.in/yaml.v3"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/printer"
	"github.com/unyo-ops/unyo/provision/service"
)

// rolloutCommand is `unyo services rollout status|history|undo`.
func rolloutCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "rollout", Short: "A service's rolling updates: their progress, its template revisions, and going back to one"}
	var watch bool
	var every time.Duration
	status := &cobra.Command{
		Use: "status NAME", Short: "How far a service's rollout is (\"2/3 replicas updated, 1 being replaced\"); --watch waits until it is done or failed", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := client.New(client.Options{URL: g.server, Token: g.token, TLS: client.TLSOptions{CAFile: g.caFile}, Hints: cliHints})
			if err != nil {
				return err
			}
			g.cl = cl
			last := ""
			for {
				ctx, cancel := contextWithTimeout(cmd, g.timeout)
				s, err := getService(ctx, g, cl, args[0])
				cancel()
				if err != nil {
					return err
				}
				line, done, failed := rolloutLine(s)
				if line != last {
					fmt.Fprintln(cmd.OutOrStdout(), line)
					last = line
				}
				switch {
				case failed:
					return fmt.Errorf("the rollout of %s failed: %s", s.GetName(), s.GetStatus().GetMessage())
				case done || !watch:
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(every):
				}
			}
		},
	}
	status.Flags().BoolVarP(&watch, "watch", "w", false, "wait until the rollout is done (exit 0) or failed (exit 1)")
	status.Flags().DurationVar(&every, "interval", time.Second, "how often --watch asks")
	history := &cobra.Command{
		Use: "history NAME", Short: "A service's compute template revisions, oldest first (at most 10 kept)", Args: cobra.ExactArgs(1),
		RunE: withService(g, func(cmd *cobra.Command, _ context.Context, _ *client.Clients, s *unyov1.RegionService) error {
			if g.output != printer.Table {
				return printMessage(cmd.OutOrStdout(), g.output, &unyov1.RegionServiceStatus{History: s.GetStatus().GetHistory(), TemplateRevision: s.GetStatus().GetTemplateRevision()})
			}
			return printHistory(cmd.OutOrStdout(), s.GetStatus())
		}),
	}
	var to int64
	undo := &cobra.Command{
		Use: "undo NAME", Short: "Apply an earlier template of a service again (the previous one, or --to-revision N), as a new revision", Args: cobra.ExactArgs(1),
		RunE: withService(g, func(cmd *cobra.Command, ctx context.Context, cl *client.Clients, s *unyov1.RegionService) error {
			h, err := undoTarget(s.GetStatus(), to)
			if err != nil {
				return fmt.Errorf("service %s: %w", s.GetName(), err)
			}
			s.Spec.Compute = service.WithTemplate(s.GetSpec().GetCompute(), h.GetTemplate())
			s.Status = nil
			out, err := cl.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{kinds.Wrap(s)}}))
			if err != nil {
				return g.explain(err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "rolling %s back to the template of revision %d\n", s.GetName(), h.GetRevision())
			return printer.ApplyResults(cmd.OutOrStdout(), out.Msg.GetResults())
		}),
	}
	undo.Flags().Int64Var(&to, "to-revision", 0, "the revision to go back to (default: the one before the current)")
	cmd.AddCommand(status, history, undo)
	return cmd
}

// withService is a command's RunE that reads the service its argument
// names and hands it to fn.
func withService(g *globals, fn func(cmd *cobra.Command, ctx context.Context, cl *client.Clients, s *unyov1.RegionService) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		cl, ctx, cancel, err := g.connect(cmd)
		if err != nil {
			return err
		}
		defer cancel()
		s, err := getService(ctx, g, cl, args[0])
		if err != nil {
			return err
		}
		return fn(cmd, ctx, cl, s)
	}
}

func getService(ctx context.Context, g *globals, cl *client.Clients, name string) (*unyov1.RegionService, error) {
	resp, err := cl.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: service.KindService, Name: name}}))
	if err != nil {
		return nil, g.explain(err)
	}
	return resp.Msg.GetObjects()[0].GetRegionService(), nil
}

// rolloutLine is a service's rollout in one line, and whether it is done
// (every replica Active at the current revision) or failed (the service
// Failed, or the rollout paused by a replica's failing update checks,
// which its line names, as kubectl's rollout status ends at a progress
// deadline).
func rolloutLine(s *unyov1.RegionService) (line string, done, failed bool) {
	st := s.GetStatus()
	progress := st.GetRollout()
	if progress == "" {
		progress = fmt.Sprintf("%d/%d replicas updated", st.GetUpdated(), st.GetReplicas())
	}
	line = fmt.Sprintf("service %s, revision %d: %s (%s)", s.GetName(), st.GetTemplateRevision(), progress, st.GetPhase())
	if st.GetPhase() == service.PhaseFailed {
		line += ": " + st.GetMessage()
	}
	done = st.GetPhase() == service.PhaseActive && st.GetUpdated() == st.GetReplicas() && st.GetRollout() == ""
	return line, done, st.GetPhase() == service.PhaseFailed || st.GetRolloutPaused() != ""
}

// undoTarget is the revision undo goes back to: to, or the newest before
// the current one.
func undoTarget(st *unyov1.RegionServiceStatus, to int64) (*unyov1.TemplateRevision, error) {
	hist := st.GetHistory()
	if to != 0 {
		if h := service.Revision(hist, to); h != nil {
			return h, nil
		}
		return nil, fmt.Errorf("revision %d is not in its history (%s)", to, revisions(hist))
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].GetRevision() < st.GetTemplateRevision() {
			return hist[i], nil
		}
	}
	return nil, fmt.Errorf("no revision before the current one (%d) to go back to", st.GetTemplateRevision())
}

func revisions(hist []*unyov1.TemplateRevision) string {
	var out []string
	for _, h := range hist {
		out = append(out, fmt.Sprint(h.GetRevision()))
	}
	if len(out) == 0 {
		return "none kept"
	}
	return "kept: " + strings.Join(out, ", ")
}

func printHistory(w io.Writer, st *unyov1.RegionServiceStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tCREATED\tFLAVOR\tIMAGE\tPROVIDER\tCOMMAND\tENV")
	for _, h := range st.GetHistory() {
		t := h.GetTemplate()
		rev := fmt.Sprint(h.GetRevision())
		if h.GetRevision() == st.GetTemplateRevision() {
			rev += " (current)"
		}
		var env []string
		for k, v := range t.GetEnv() {
			env = append(env, k+"="+v)
		}
		slices.Sort(env)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rev, h.GetCreatedAt().AsTime().UTC().Format(time.RFC3339),
			t.GetFlavor(), t.GetImage(), t.GetProvider(), strings.Join(t.GetCommand(), " "), strings.Join(env, " "))
	}
	return tw.Flush()
}

// printMessage prints one message as JSON or YAML (protojson's names).
func printMessage(w io.Writer, format string, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return err
	}
	if format == "json" {
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return yaml.NewEncoder(w).Encode(v)
}
