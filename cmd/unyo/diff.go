package main

import (
	"bytes"
	"fmt"
	"io"

	"connectrpc.com/connect"
	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/manifest"
)

// errDiffers makes `unyo diff` exit 1 when there are differences, as
// kubectl diff and diff(1) do, with nothing more printed; its other errors
// exit 2.
var errDiffers = &exitError{code: 1}

func newDiffCommand(g *globals) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "diff -f FILE",
		Short: "Show what apply -f would change, as a unified diff of the YAML",
		Long: `Diff compares each document of the files with what is stored under its kind
and name (in its cluster, or in every cluster that has it when it names
none) and prints a unified diff of the YAML that get -o yaml would print:
"-" lines are stored, "+" lines are the file's. A document stored nowhere
is all "+". It exits 0 when nothing would change, 1 when something would,
and 2 on an error. Only what the files name is compared: apply never
deletes, and neither does diff show deletions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := diffFiles(cmd, g, files)
			if err != nil && err != errDiffers {
				return &exitError{code: 2, err: err}
			}
			return err
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML file or directory (repeatable; - for standard input)")
	cmd.Flags().BoolP("recursive", "R", false, "with -f DIR, also the files of its subdirectories")
	return cmd
}

// diffFiles prints the diff of the files' objects; errDiffers when there
// is one.
func diffFiles(cmd *cobra.Command, g *globals, files []string) error {
	objs, err := readFiles(cmd, files)
	if err != nil {
		return err
	}
	cl, ctx, cancel, err := g.connect(cmd)
	if err != nil {
		return err
	}
	defer cancel()
	differs := false
	var cerrs []*unyov1.ClusterError
	for _, o := range objs {
		resp, err := cl.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: kinds.Ref(o)}))
		var live []*unyov1.Object
		switch {
		case connect.CodeOf(err) == connect.CodeNotFound:
		case err != nil:
			return g.explain(err)
		default:
			live = resp.Msg.GetObjects()
			cerrs = append(cerrs, resp.Msg.GetClusterErrors()...)
		}
		d, err := objectDiff(o, live)
		if err != nil {
			return err
		}
		if d != "" {
			differs = true
			io.WriteString(cmd.OutOrStdout(), d)
		}
	}
	if err := printed(cmd, nil, cerrs); err != nil {
		return err
	}
	if differs {
		return errDiffers
	}
	return nil
}

// objectDiff is the unified diff from each stored copy of an object to
// the file's document, headed by the object and its copy's cluster; ""
// when every copy is the same.
func objectDiff(want *unyov1.Object, live []*unyov1.Object) (string, error) {
	name := kinds.KindOf(want) + "/" + kinds.Name(want)
	if len(live) == 0 {
		live = []*unyov1.Object{nil}
	}
	var out bytes.Buffer
	for _, l := range live {
		w := proto.Clone(want).(*unyov1.Object)
		from, label := "", name+" (not stored)"
		if l != nil {
			// A document naming no cluster stands for every cluster's copy.
			if kinds.Cluster(w) == "" {
				kinds.SetCluster(w, kinds.Cluster(l))
			}
			y, err := yamlOf(l)
			if err != nil {
				return "", err
			}
			from, label = y, name
			if c := kinds.Cluster(l); c != "" {
				label += " in " + c
			}
		}
		to, err := yamlOf(w)
		if err != nil {
			return "", err
		}
		d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(from), B: difflib.SplitLines(to),
			FromFile: "stored: " + label, ToFile: "file: " + name, Context: 3,
		})
		if err != nil {
			return "", fmt.Errorf("diff %s: %w", name, err)
		}
		out.WriteString(d)
	}
	return out.String(), nil
}

// yamlOf is an object as get -o yaml prints it (server fields left out).
func yamlOf(o *unyov1.Object) (string, error) {
	var b bytes.Buffer
	err := manifest.Encode(&b, []*unyov1.Object{o})
	return b.String(), err
}
