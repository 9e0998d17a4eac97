// Command mkdeb builds unyo's Debian package from the staged release tree
// with nfpm's Go module (for `make dist`, see dist.sh).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

func main() {
	root := flag.String("root", "", "the staged release tree (bin/, lib/, etc/, share/)")
	version := flag.String("version", "", "the package version (starts with a digit)")
	arch := flag.String("arch", "amd64", "GOARCH")
	out := flag.String("out", "dist", "directory for the package")
	flag.Parse()
	if err := build(*root, *version, *arch, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkdeb:", err)
		os.Exit(1)
	}
}

func build(root, version, arch, out string) error {
	in := func(p string) string { return filepath.Join(root, p) }
	contents := files.Contents{
		{Source: in("bin/unyo"), Destination: "/usr/bin/unyo", FileInfo: &files.ContentFileInfo{Mode: 0o755}},
		{Source: in("bin/unyo-agent"), Destination: "/usr/bin/unyo-agent", FileInfo: &files.ContentFileInfo{Mode: 0o755}},
		{Source: in("lib/unyo/plugins"), Destination: "/usr/lib/unyo/plugins", Type: files.TypeTree},
		{Source: in("lib/systemd/system"), Destination: "/lib/systemd/system", Type: files.TypeTree},
		{Source: in("share/unyo/prometheus"), Destination: "/usr/share/unyo/prometheus", Type: files.TypeTree},
		{Source: in("share/man/man1"), Destination: "/usr/share/man/man1", Type: files.TypeTree},
	}
	for _, c := range []string{"root.yaml", "cluster.yaml", "agent.yaml"} {
		contents = append(contents, &files.Content{Source: in("etc/unyo/" + c), Destination: "/etc/unyo/" + c, Type: files.TypeConfigNoReplace, FileInfo: &files.ContentFileInfo{Mode: 0o640}})
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:        "unyo",
		Arch:        arch,
		Platform:    "linux",
		Version:     version,
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  "unyo maintainers <unyo@unyo-ops.invalid>",
		Description: "monitoring and operations for fleets: root, cluster and agent in one binary",
		Homepage:    "https://github.com/unyo-ops/unyo",
		License:     "Apache-2.0",
		Overridables: nfpm.Overridables{
			Contents: contents,
			Suggests: []string{"monitoring-plugins-basic", "prometheus"},
		},
	})
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return fmt.Errorf("prepare the package: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	name := filepath.Join(out, deb.Default.ConventionalFileName(info))
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := deb.Default.Package(info, f); err != nil {
		f.Close()
		return fmt.Errorf("build %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Println(name)
	return nil
}
