package main

import (
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/printer"
	"github.com/unyo-ops/unyo/core/rbac"
)

func newTokensCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tokens", Aliases: []string{"token"}, Short: "API tokens: issue scoped tokens, list and revoke them (admins)"}

	var (
		req             unyov1.CreateTokenRequest
		clusters, kinds string
		expires         string
	)
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Issue a token on the server (root or a cluster); prints its secret once",
		Long: `Issue a token on the server you talk to. The secret is printed once and the
server keeps only its SHA-256; store it where its holder finds it.

Roles: viewer reads, operator also acknowledges and closes alerts and ends
maintenance, admin also applies and deletes. --commands is the separate right
to apply checks that run commands on agents. --clusters and --kinds narrow
what the token sees and writes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			req.Clusters, req.Kinds = splitList(clusters), splitList(kinds)
			if expires != "" && expires != "never" {
				d, err := parseAge(expires)
				if err != nil || d <= 0 {
					return fmt.Errorf("--expires %q: expected a duration such as 90d or 12h, or never", expires)
				}
				req.ExpiresIn = durationpb.New(d)
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Tokens.CreateToken(ctx, connect.NewRequest(&req))
			if err != nil {
				return g.explain(err)
			}
			if g.output != printer.Table {
				return printer.Tokens(cmd.OutOrStdout(), g.output, []*unyov1.Token{resp.Msg.GetToken()})
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.Msg.GetSecret())
			fmt.Fprintf(cmd.ErrOrStderr(), "token %q (id %s, role %s) created; the secret above is shown only now\n",
				resp.Msg.GetToken().GetName(), resp.Msg.GetToken().GetId(), resp.Msg.GetToken().GetRole())
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&req.Role, "role", "", "viewer, operator or admin (required)")
	f.BoolVar(&req.Commands, "commands", false, "may apply checks that run commands on agents")
	f.StringVar(&clusters, "clusters", "", "only these clusters (comma-separated; default all)")
	f.StringVar(&kinds, "kinds", "", "only apply and delete these kinds, such as Check,Maintenance (default all)")
	f.StringVar(&expires, "expires", "90d", "lifetime such as 90d or 12h, or never")
	_ = create.MarkFlagRequired("role")

	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List the tokens the server issued (never their secrets)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Tokens.ListTokens(ctx, connect.NewRequest(&unyov1.ListTokensRequest{}))
			if err != nil {
				return g.explain(err)
			}
			return printer.Tokens(cmd.OutOrStdout(), g.output, resp.Msg.GetTokens())
		},
	}
	revoke := &cobra.Command{
		Use: "revoke NAME", Short: "Revoke a token; servers refuse it within seconds", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Tokens.RevokeToken(ctx, connect.NewRequest(&unyov1.RevokeTokenRequest{Name: args[0]}))
			if err != nil {
				return g.explain(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %q (id %s) revoked\n", resp.Msg.GetToken().GetName(), resp.Msg.GetToken().GetId())
			return nil
		},
	}
	generate := &cobra.Command{
		Use:   "generate",
		Short: "Print a new random token for a configuration file (offline)",
		Long: `Print a new random token (32 bytes from the system's random source) for
server.admin_tokens, server.join_tokens, root.cluster_token and the like. Nothing
is sent anywhere; put the same value where both sides expect it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := rbac.NewSecret()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), s)
			return err
		},
	}
	cmd.AddCommand(create, ls, revoke, generate)
	return cmd
}

func newAuditCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "The audit log: every write, who made it, from where, before and after (admins)"}
	var (
		req   unyov1.ListAuditRequest
		since string
		limit int
	)
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List audit records, newest first (root merges its own and every cluster's)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if req.Since, err = parseWhen("since", since, time.Now()); err != nil {
				return err
			}
			req.Limit = int32(limit)
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Audit.ListAudit(ctx, connect.NewRequest(&req))
			if err != nil {
				return g.explain(err)
			}
			return printed(cmd, printer.Audit(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, resp.Msg.GetRecords()), resp.Msg.GetClusterErrors())
		},
	}
	f := ls.Flags()
	f.StringVar(&since, "since", "", "only records since this time (RFC 3339) or age (1h, 7d)")
	f.StringVar(&req.Who, "who", "", "only records of this actor (a token's name)")
	f.StringVar(&req.Kind, "kind", "", "only records about this kind (Check, Maintenance, Alert, Token...)")
	f.StringVar(&req.Cluster, "cluster", "", "only this cluster's records (root for root's own)")
	f.IntVar(&limit, "limit", 100, "at most this many records")
	cmd.AddCommand(ls)
	return cmd
}
