package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"klab/guest/proto"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print klab's version",
		Example: "  klab version",
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			v := "(devel)"
			if bi, ok := debug.ReadBuildInfo(); ok {
				v = bi.Main.Version
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						v += " " + s.Value
					}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "klab %s, protocol v%d\n", v, proto.Version)
		},
	}
}
