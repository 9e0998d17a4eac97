package main

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/printer"
)

// operator is who the CLI says is acting: --by, UNYO_USER, or the login name.
func operator(by string) string {
	if by != "" {
		return by
	}
	if v := os.Getenv("UNYO_USER"); v != "" {
		return v
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// noteActor says so when the server recorded someone other than --by: with
// authentication the token says who acts, not the flag.
func noteActor(cmd *cobra.Command, claimed string, a *unyov1.Alert) {
	h := a.GetHistory()
	if len(h) == 0 {
		return
	}
	if got := h[len(h)-1].GetBy(); got != claimed {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: recorded as %s (the name of your token), not %s\n", got, claimed)
	}
}

// alertFilter are the flags alerts ls and watch share.
type alertFilter struct {
	req    unyov1.ListAlertsRequest
	levels string
	states string
	all    bool
}

func (f *alertFilter) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.req.Cluster, "cluster", "", "only this cluster")
	fl.StringVar(&f.req.Node, "node", "", "only this node")
	fl.StringVar(&f.req.Check, "check", "", "only this check")
	fl.StringVar(&f.levels, "level", "", "only these levels: fatal, critical, warning (comma-separated)")
	fl.StringVar(&f.states, "state", "", "only these states: open, acknowledged, resolved, closed (default: all but closed)")
	fl.BoolVar(&f.all, "all", false, "closed alerts too")
}

func (f *alertFilter) request() (*unyov1.ListAlertsRequest, error) {
	req := &unyov1.ListAlertsRequest{Cluster: f.req.Cluster, Node: f.req.Node, Check: f.req.Check}
	for _, w := range splitList(f.levels) {
		l, err := unyov1.ParseAlertLevel(w)
		if err != nil {
			return nil, fmt.Errorf("--level: %w", err)
		}
		req.Levels = append(req.Levels, l)
	}
	for _, w := range splitList(f.states) {
		s, err := unyov1.ParseAlertState(w)
		if err != nil {
			return nil, fmt.Errorf("--state: %w", err)
		}
		req.States = append(req.States, s)
	}
	if f.all && len(req.States) == 0 {
		req.States = []unyov1.AlertState{unyov1.AlertState_ALERT_STATE_OPEN, unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED, unyov1.AlertState_ALERT_STATE_RESOLVED, unyov1.AlertState_ALERT_STATE_CLOSED}
	}
	return req, nil
}

func splitList(s string) []string {
	var out []string
	for _, w := range strings.Split(s, ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

func newAlertsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "alerts", Aliases: []string{"alert"}, Short: "Alerts: what operators must look at and close"}
	var lsf alertFilter
	var alertSel string
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List alerts of every cluster, most severe and oldest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := lsf.request()
			if err != nil {
				return err
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Alerts.ListAlerts(ctx, connect.NewRequest(req))
			if err != nil {
				return g.explain(err)
			}
			alerts, err := selectWhere(alertSel, resp.Msg.GetAlerts(), alertLabels)
			if err != nil {
				return err
			}
			return printed(cmd, printer.Alerts(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, alerts), resp.Msg.GetClusterErrors())
		},
	}
	lsf.bind(ls)
	addSelector(ls, &alertSel)

	var clusterName string
	get := &cobra.Command{
		Use: "get ID", Short: "Show one alert with its history (a unique prefix of its ID will do)", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeIDs(g, "alert"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := expandID(cmd, g, "alert", args[0], clusterName)
			if err != nil {
				return err
			}
			args = []string{id}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Alerts.GetAlert(ctx, connect.NewRequest(&unyov1.GetAlertRequest{Id: args[0], Cluster: clusterName}))
			if err != nil {
				return g.explain(err)
			}
			return printed(cmd, printer.AlertDetails(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, resp.Msg.GetAlerts()), resp.Msg.GetClusterErrors())
		},
	}
	get.Flags().StringVar(&clusterName, "cluster", "", "only this cluster")

	transition := func(use, short string, needReason bool, call func(*cobra.Command, *unyov1.AlertActionRequest) (*unyov1.Alert, error)) *cobra.Command {
		var by, reason string
		c := &cobra.Command{
			Use: use, Short: short + " (a unique prefix of its ID will do)", Args: cobra.ExactArgs(1),
			ValidArgsFunction: completeIDs(g, "alert"),
			RunE: func(cmd *cobra.Command, args []string) error {
				if needReason && reason == "" {
					return errors.New("say why: --reason TEXT (every close is recorded with who and why)")
				}
				who := operator(by)
				if who == "" {
					return errors.New("say who you are: --by NAME or UNYO_USER")
				}
				id, err := expandID(cmd, g, "alert", args[0], clusterName)
				if err != nil {
					return err
				}
				a, err := call(cmd, &unyov1.AlertActionRequest{Id: id, Cluster: clusterName, By: who, Reason: reason})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "alert %s is %s\n", a.GetId(), a.GetState().Name())
				noteActor(cmd, who, a)
				return nil
			},
		}
		c.Flags().StringVar(&by, "by", "", "who acts, on a server without authentication (default: UNYO_USER or your login name); with a token the server records the token's name")
		c.Flags().StringVar(&reason, "reason", "", "why")
		c.Flags().StringVar(&clusterName, "cluster", "", "the alert's cluster (default: ask every cluster)")
		return c
	}
	ack := transition("ack ID", "Acknowledge an alert: someone is on it", false, func(cmd *cobra.Command, req *unyov1.AlertActionRequest) (*unyov1.Alert, error) {
		cl, ctx, cancel, err := g.connect(cmd)
		if err != nil {
			return nil, err
		}
		defer cancel()
		resp, err := cl.Alerts.AckAlert(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, g.explain(err)
		}
		return resp.Msg.GetAlert(), nil
	})
	closeCmd := transition("close ID", "Close an alert (needs --reason)", true, func(cmd *cobra.Command, req *unyov1.AlertActionRequest) (*unyov1.Alert, error) {
		cl, ctx, cancel, err := g.connect(cmd)
		if err != nil {
			return nil, err
		}
		defer cancel()
		resp, err := cl.Alerts.CloseAlert(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, g.explain(err)
		}
		return resp.Msg.GetAlert(), nil
	})

	var wf alertFilter
	var interval time.Duration
	var once bool
	watch := &cobra.Command{
		Use: "watch", Short: "A live view of alerts that updates in place, most severe and oldest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := wf.request()
			if err != nil {
				return err
			}
			return watchAlerts(cmd, g, req, interval, once)
		},
	}
	wf.bind(watch)
	watch.Flags().DurationVar(&interval, "interval", 2*time.Second, "how often to refresh")
	watch.Flags().BoolVar(&once, "once", false, "draw one screen and exit (for scripts and tests)")
	cmd.AddCommand(ls, get, ack, closeCmd, watch)
	return cmd
}

// watchAlerts redraws the alert table in place until interrupted.
func watchAlerts(cmd *cobra.Command, g *globals, req *unyov1.ListAlertsRequest, interval time.Duration, once bool) error {
	cl, _, cancel, err := g.connect(cmd)
	if err != nil {
		return err
	}
	cancel()
	out := cmd.OutOrStdout()
	// Into a pipe or a file, screens follow each other without the
	// terminal's control codes, which would only be noise there.
	redraw := !once && isTerminal(out)
	for {
		ctx, cancel := contextWithTimeout(cmd, g.timeout)
		resp, err := cl.Alerts.ListAlerts(ctx, connect.NewRequest(req))
		cancel()
		var screen strings.Builder
		fmt.Fprintf(&screen, "unyo alerts — %s — every %s (Ctrl-C to stop)\n\n", time.Now().Format("15:04:05"), interval)
		if err != nil {
			fmt.Fprintf(&screen, "%v\n", g.explain(err))
		} else {
			if err := printer.Alerts(&screen, printer.Table, resp.Msg.GetAlerts()); err != nil {
				return err
			}
			printer.ClusterErrors(&screen, resp.Msg.GetClusterErrors())
		}
		if redraw {
			// Home the cursor and clear the screen, so the view updates in place.
			fmt.Fprint(out, "\x1b[H\x1b[2J")
		}
		fmt.Fprint(out, screen.String())
		if once {
			return nil
		}
		select {
		case <-cmd.Context().Done():
			return nil
		case <-time.After(interval):
		}
	}
}
