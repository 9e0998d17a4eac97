package main

import (
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/printer"
)

// readFiles decodes every -f file ("-" is standard input; a directory is
// its manifest files, see expandFiles); any error in any file means nothing
// is sent.
func readFiles(cmd *cobra.Command, files []string) ([]*unyov1.Object, error) {
	if len(files) == 0 {
		return nil, errors.New("no file given: use -f FILE (or -f - for standard input)")
	}
	recursive, _ := cmd.Flags().GetBool("recursive")
	files, err := expandFiles(files, recursive)
	if err != nil {
		return nil, err
	}
	var all []*unyov1.Object
	for _, f := range files {
		var objs []*unyov1.Object
		var err error
		if f == "-" {
			objs, err = manifest.Decode(cmd.InOrStdin(), "standard input")
		} else {
			objs, err = manifest.DecodeFile(f)
		}
		if err != nil {
			return nil, err
		}
		all = append(all, objs...)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%s: no documents", strings.Join(files, ", "))
	}
	return all, nil
}

// namedRefs turns "KIND NAME..." arguments into references.
func namedRefs(args []string, cluster string) ([]*unyov1.ObjectRef, error) {
	k, err := builtin.Kinds().Parse(args[0])
	if err != nil {
		return nil, err
	}
	var refs []*unyov1.ObjectRef
	for _, name := range args[1:] {
		refs = append(refs, &unyov1.ObjectRef{Kind: k.Name, Name: name, Cluster: cluster})
	}
	return refs, nil
}

// refsFrom names the objects a command acts on: those of the files, or
// KIND NAME... from the arguments, never both.
func refsFrom(cmd *cobra.Command, files, args []string, cluster string) ([]*unyov1.ObjectRef, error) {
	switch {
	case len(files) > 0 && len(args) > 0:
		return nil, errors.New("give either -f FILE or KIND NAME..., not both")
	case len(files) > 0:
		objs, err := readFiles(cmd, files)
		if err != nil {
			return nil, err
		}
		refs := make([]*unyov1.ObjectRef, len(objs))
		for i, o := range objs {
			refs[i] = kinds.Ref(o)
		}
		return refs, nil
	}
	return namedRefs(args, cluster)
}

func newApplyCommand(g *globals) *cobra.Command {
	var files []string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update the objects in multi-document YAML files",
		Long: `Apply creates or updates every document of the files (kind, name, optional
cluster, labels, spec). An object with no cluster goes to every cluster. The
files are checked completely first: one bad document and nothing is applied.
Each cluster stores its part in one transaction, whole or not at all; when a
cluster refuses or does not answer in time, the others keep their part and
the command names it and fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := readFiles(cmd, files)
			if err != nil {
				return err
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: objs, DryRun: dryRun}))
			if err != nil {
				return g.explain(err)
			}
			results := resp.Msg.GetResults()
			if dryRun {
				results = dryRunResults(results)
			}
			if err := printer.ApplyResults(cmd.OutOrStdout(), results); err != nil {
				return err
			}
			errs := resp.Msg.GetClusterErrors()
			printer.ClusterErrors(cmd.ErrOrStderr(), errs)
			if len(errs) > 0 {
				// Each cluster applies its part in one transaction.
				return fmt.Errorf("%d cluster(s) did not confirm their part of this apply; each cluster stores its part whole or not at all, so apply the same files again once they answer (what is already stored comes back unchanged)", len(errs))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML file or directory to apply (repeatable; - for standard input)")
	cmd.Flags().BoolP("recursive", "R", false, "with -f DIR, also the files of its subdirectories")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "have the servers validate and try the apply, references and rules included, and say what it would do; nothing is stored")
	return cmd
}

func newDeleteCommand(g *globals) *cobra.Command {
	var files []string
	var clusterName string
	var ignoreNotFound bool
	cmd := &cobra.Command{
		Use:               "delete (-f FILE | KIND NAME...)",
		Short:             "Delete the objects named in files or on the command line",
		ValidArgsFunction: completeKindNames(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) == 0 && len(args) < 2 {
				return errors.New("say what to delete: -f FILE, or KIND NAME (for example: unyo delete check disk)")
			}
			refs, err := refsFrom(cmd, files, args, clusterName)
			if err != nil {
				return err
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Objects.Delete(ctx, connect.NewRequest(&unyov1.DeleteRequest{Refs: refs}))
			if err != nil {
				return g.explain(err)
			}
			printer.ApplyResults(cmd.OutOrStdout(), resp.Msg.GetResults())
			if err := printed(cmd, nil, resp.Msg.GetClusterErrors()); err != nil {
				return err
			}
			// As kubectl: deleting what is not there is an error a script
			// should see, unless it asked not to.
			if missing := notFound(refs, resp.Msg.GetResults()); len(missing) > 0 && !ignoreNotFound {
				return fmt.Errorf("not found: %s (--ignore-not-found to succeed anyway)", strings.Join(missing, ", "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "succeed when an object is not there")
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML file naming the objects (repeatable)")
	cmd.Flags().StringVar(&clusterName, "cluster", "", "only in this cluster")
	return cmd
}

func newGetCommand(g *globals) *cobra.Command {
	var files []string
	var clusterName, sel string
	cmd := &cobra.Command{
		Use:               "get (-f FILE | KIND [NAME])",
		Short:             "Show objects: those named in files, one by name, or all of a kind",
		ValidArgsFunction: completeKindNames(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			var refs []*unyov1.ObjectRef
			listKind := ""
			switch {
			case len(files) == 0 && len(args) == 0:
				return errors.New("say what to get: -f FILE, KIND or KIND NAME (for example: unyo get check)")
			case len(files) == 0 && len(args) == 1:
				k, err := builtin.Kinds().Parse(args[0])
				if err != nil {
					return err
				}
				listKind = k.Name
			default:
				var err error
				if refs, err = refsFrom(cmd, files, args, clusterName); err != nil {
					return err
				}
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			var objs []*unyov1.Object
			var cerrs []*unyov1.ClusterError
			if listKind != "" {
				resp, err := cl.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: listKind, Cluster: clusterName}))
				if err != nil {
					return g.explain(err)
				}
				objs, cerrs = resp.Msg.GetObjects(), resp.Msg.GetClusterErrors()
				if objs, err = selectWhere(sel, objs, objectLabels); err != nil {
					return err
				}
			}
			for _, ref := range refs {
				resp, err := cl.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: ref}))
				if err != nil {
					return g.explain(err)
				}
				objs = append(objs, resp.Msg.GetObjects()...)
				cerrs = append(cerrs, resp.Msg.GetClusterErrors()...)
			}
			return printed(cmd, printer.Objects(printer.Partial(cmd.OutOrStdout(), len(cerrs) > 0), g.output, objs), cerrs)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML file naming the objects (repeatable)")
	cmd.Flags().StringVar(&clusterName, "cluster", "", "only in this cluster")
	cmd.Flags().StringVarP(&sel, "selector", "l", "", "with KIND alone: "+selectorHelp)
	return cmd
}
