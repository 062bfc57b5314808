package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func newDoctorCommand(g *globalOptions) *cobra.Command {
	var probe, asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the host: QEMU, KVM, Debian suites, cache",
		Long: `Check what klab needs on this host: QEMU and its version; whether /dev/kvm is
present and actually runs a guest (--probe boots a cached kernel under KVM and
waits for its agent, at most 12 s, and caches the verdict); whether the Debian
suites are reachable through the host's mirror; the Go toolchain; and the cache
directory with its free space.`,
		Example: "  klab doctor\n  klab doctor --probe\n  klab doctor --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			lo := g.labOptions()
			checks := lo.Doctor(cmd.Context(), probe)
			if asJSON {
				return printJSON(checks)
			}
			bad := 0
			for _, c := range checks {
				mark := "ok  "
				if !c.OK {
					mark = "FAIL"
					bad++
				}
				fmt.Printf("%s %-24s %s\n", mark, c.Name, c.Detail)
			}
			if bad > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d check(s) failed", bad)}
			}
			fmt.Fprintln(os.Stderr, "klab: all checks passed")
			return nil
		},
	}
	cmd.Flags().BoolVar(&probe, "probe", true, "prove KVM with a probe boot of a cached kernel")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
