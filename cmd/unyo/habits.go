package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/labelsel"
)

// isTerminal reports whether w is a terminal (not a pipe or a file).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// manifestExts are the files `apply -f DIR` reads, as kubectl does.
var manifestExts = []string{".yaml", ".yml", ".json"}

// expandFiles replaces each directory among -f's arguments with its
// manifest files (sorted; with recursive, those of its subdirectories too).
func expandFiles(files []string, recursive bool) ([]string, error) {
	var out []string
	for _, f := range files {
		if f == "-" {
			out = append(out, f)
			continue
		}
		st, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, f)
			continue
		}
		found, err := walkFiles(f, recursive, manifestExts...)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			hint := ""
			if !recursive {
				hint = " (-R reads its subdirectories too)"
			}
			return nil, fmt.Errorf("%s: no %s files%s", f, strings.Join(manifestExts, ", "), hint)
		}
		out = append(out, found...)
	}
	return out, nil
}

// notFound names the objects a delete found nowhere: every result for
// them says "not found" (root and each cluster answer for their copy).
func notFound(refs []*unyov1.ObjectRef, results []*unyov1.ApplyResult) []string {
	key := func(r *unyov1.ObjectRef) string { return r.GetKind() + "/" + r.GetName() }
	found := map[string]bool{}
	for _, r := range results {
		if r.GetAction() != "not found" {
			found[key(r.GetRef())] = true
		}
	}
	var missing []string
	for _, r := range refs {
		if !found[key(r)] {
			missing = append(missing, key(r))
		}
	}
	return missing
}

// selectorHelp is -l's help, shared by every list.
const selectorHelp = "only those whose labels match: key=value, key!=value, key in (a,b), key notin (a,b), key, !key; comma-separated, all must hold"

// addSelector gives a list command -l/--selector; the CLI filters what the
// servers return with it.
func addSelector(cmd *cobra.Command, s *string) {
	cmd.Flags().StringVarP(s, "selector", "l", "", selectorHelp)
}

// selectWhere keeps the items whose labels match the selector s.
func selectWhere[T any](s string, items []T, labels func(T) map[string]string) ([]T, error) {
	sel, err := labelsel.Parse(s)
	if err != nil || sel.Empty() {
		return items, err
	}
	var out []T
	for _, it := range items {
		if sel.Matches(labels(it)) {
			out = append(out, it)
		}
	}
	return out, nil
}

// objectLabels are an object's top-level labels.
func objectLabels(o *unyov1.Object) map[string]string {
	out := map[string]string{}
	m := kinds.Message(o)
	if m == nil {
		return out
	}
	f := m.ProtoReflect().Descriptor().Fields().ByName("labels")
	if f == nil || !f.IsMap() {
		return out
	}
	m.ProtoReflect().Get(f).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		out[k.String()] = v.String()
		return true
	})
	return out
}

// nodeLabels are a node's labels as check selectors see them: the
// topology labels win over the agent's on their keys.
func nodeLabels(n *unyov1.Node) map[string]string {
	out := maps.Clone(n.GetLabels())
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, n.GetTopologyLabels())
	return out
}

// alertLabels are what -l matches of an alert, which has no labels of its
// own: cluster, node, check, rule, level and state.
func alertLabels(a *unyov1.Alert) map[string]string {
	return map[string]string{"cluster": a.GetCluster(), "node": a.GetNode(), "check": a.GetCheck(),
		"rule": a.GetRule(), "level": a.GetLevel().Name(), "state": a.GetState().Name()}
}

// dryRunResults marks what a dry run reports, as kubectl does.
func dryRunResults(rs []*unyov1.ApplyResult) []*unyov1.ApplyResult {
	out := make([]*unyov1.ApplyResult, len(rs))
	for i, r := range rs {
		out[i] = &unyov1.ApplyResult{Ref: r.GetRef(), Action: r.GetAction() + " (dry run)"}
	}
	return out
}

// exitError ends the command with an exit code other than 1; err, if
// any, is printed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// reportExit prints a command's error, if it has one to print, and
// returns the process's exit code.
func reportExit(w io.Writer, err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(w, "unyo:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(w, "unyo:", err)
	return 1
}
