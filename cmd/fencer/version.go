package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// version, when set at build time (go build -ldflags "-X main.version=v1.2.0"),
// overrides the module version that Go records in the binary.
var version string

// buildInfo is what "fencer version" reports.
type buildInfo struct {
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
	Go         string `json:"go"`
}

// readBuildInfo reads the version from -ldflags or the module, and the commit
// from the VCS stamp that go build adds when it builds inside a checkout.
func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.time":
				b.CommitTime = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" || b.Version == "(devel)" {
		b.Version = "devel"
	}
	return b
}

// String is one line: "v1.2.0 (commit 4a88498c1f2e, go1.26.0)".
func (b buildInfo) String() string {
	var parts []string
	if b.Commit != "" {
		c := "commit " + b.Commit[:min(12, len(b.Commit))]
		if b.Modified {
			c += " with local changes"
		}
		parts = append(parts, c)
	}
	parts = append(parts, b.Go)
	return fmt.Sprintf("%s (%s)", b.Version, strings.Join(parts, ", "))
}

type versionOptions struct {
	output string
}

func newVersionCmd() *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print fencer's version, commit and Go version",
		Example: `  fencer version
  fencer version -o json | jq -r .commit
  fencer --version`,
		Args: cli.Positional(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	return cmd
}

func (o *versionOptions) run(cmd *cobra.Command) error {
	b := readBuildInfo()
	switch o.output {
	case "json":
		return cli.WriteJSON(cmd.OutOrStdout(), b)
	case "text":
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "fencer %s\n", b)
		return err
	}
	return cli.Usagef("--output %q: want text or json", o.output)
}
