package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"klab/guest/proto"
	"klab/images/embedded"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print klab's version, commit and guest protocol version",
		Long:    "Print klab's version, the commit it was built from, and the version of the\nprotocol between klab and its guest agent. klab --version prints the same.",
		Example: "  klab version\n  klab --version",
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
		},
	}
}

// buildCommit is set by make build (-ldflags -X main.buildCommit=...) for
// toolchains that record no VCS information (GOFLAGS=-buildvcs=false).
var buildCommit string

// versionLine is what klab version and klab --version print: the module
// version, the commit (with "modified" for a build from a dirty tree) and
// the guest protocol version.
func versionLine() string {
	v, commit := "(devel)", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified {
			commit += " (modified)"
		}
	}
	if commit == "unknown" && buildCommit != "" {
		commit = buildCommit
	}
	line := fmt.Sprintf("klab %s, commit %s, protocol v%d", v, commit, proto.Version)
	if p := embedded.Get(); p != nil {
		line += fmt.Sprintf(", guest agent src-%.12s built in", p.AgentKey)
	}
	return line
}
