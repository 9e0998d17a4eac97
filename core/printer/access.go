package printer

import (
	"io"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// Tokens prints issued tokens (never their secrets: the server has none).
func Tokens(w io.Writer, format string, tokens []*unyov1.Token) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return printList(p, "tokens", tokens, func() table {
		t := table{header: []string{"NAME", "ID", "ROLE", "COMMANDS", "CLUSTERS", "KINDS", "CREATED BY", "AGE", "EXPIRES", "LAST USED", "STATE"}}
		now := p.now()
		for _, tk := range tokens {
			cmds := "no"
			if tk.GetCommands() {
				cmds = "yes"
			}
			expires, state := "never", "live"
			if e := tk.GetExpiresAt(); e != nil {
				expires = e.AsTime().UTC().Format(time.DateOnly)
				if !now.Before(e.AsTime()) {
					state = "expired"
				}
			}
			if tk.GetRevokedAt() != nil {
				state = "revoked " + age(now, tk.GetRevokedAt()) + " ago"
			}
			t.add(tk.GetName(), tk.GetId(), tk.GetRole(), cmds, allOr(tk.GetClusters()), allOr(tk.GetKinds()),
				orDash(tk.GetCreatedBy()), age(now, tk.GetCreatedAt()), expires, age(now, tk.GetLastUsedAt()), state)
		}
		return t
	})
}

func allOr(s []string) string {
	if len(s) == 0 {
		return "all"
	}
	return strings.Join(s, ",")
}

// Audit prints audit records, newest first. The table says who did what to
// which object and how it went; JSON and YAML carry the objects before and
// after.
func Audit(w io.Writer, format string, recs []*unyov1.AuditRecord) error {
	p, err := newPrinter(w, format, time.Now)
	if err != nil {
		return err
	}
	return printList(p, "audit records", recs, func() table {
		t := table{header: []string{"TIME", "WHO", "FROM", "ACTION", "TARGET", "CHANGE", "OUTCOME"}}
		for _, r := range recs {
			target := "-" // a call refused before its body was read
			if r.GetKind() != "" || r.GetName() != "" {
				where := r.GetCluster()
				if where == "" {
					where = "root"
				}
				target = r.GetKind() + "/" + r.GetName() + " (" + where + ")"
			}
			t.add(r.GetAt().AsTime().UTC().Format(time.RFC3339), r.GetWho(), truncate(orDash(r.GetFrom()), 40),
				r.GetProcedure(), target, change(r), truncate(r.GetOutcome(), 60))
		}
		return t
	})
}

// change names what a record did to its object.
func change(r *unyov1.AuditRecord) string {
	switch {
	case r.GetOutcome() != "ok", r.GetBefore() == "" && r.GetAfter() == "":
		return "-"
	case r.GetBefore() == "":
		return "created"
	case r.GetAfter() == "":
		return "removed"
	default:
		return "changed"
	}
}
