package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/unyo-ops/unyo/core/launch"
)

// newManCommand writes the man pages of the whole command tree (unyo.1,
// unyo-apply.1, ...), for `make man` and the packages. Hidden: operators
// read the pages, they do not make them.
func newManCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "man",
		Short:  "Write unyo's man pages into a directory",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("create %s: %w", dir, err)
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true // reproducible pages
			hdr := &doc.GenManHeader{Title: "UNYO", Section: "1", Source: "unyo " + launch.Version, Manual: "unyo manual"}
			if err := doc.GenManTree(root, hdr, dir); err != nil {
				return fmt.Errorf("write the man pages: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "man", "directory to write the pages to")
	return cmd
}
