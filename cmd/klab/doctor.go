package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"klab/lab"
)

func newDoctorCommand(g *globalOptions) *cobra.Command {
	var probe, asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the host: QEMU, KVM, Debian suites, cache",
		Long: `Check what klab needs on this host: QEMU and its version; whether /dev/kvm is
present and actually runs a guest (--probe boots a cached kernel under KVM and
waits for its agent, at most 12 s, and caches the verdict; --probe=false shows
the cached verdict); whether the Debian suites are reachable through the
host's mirror; the Go toolchain; and the cache directory with its free space.

Each line is a mark, the check and what was found: "ok", "warn" (klab works,
but not as well as it could: guests run under TCG, several times slower than
KVM) or "FAIL". Exit status 1 when a check failed; warnings do not count.`,
		Example: "  klab doctor\n  klab doctor --probe=false\n  klab doctor --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			lo := g.labOptions()
			checks := lo.Doctor(cmd.Context(), probe)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), checks)
			}
			return printChecks(cmd.OutOrStdout(), os.Stderr, checks)
		},
	}
	cmd.Flags().BoolVar(&probe, "probe", true, "prove KVM with a probe boot of a cached kernel (false: show the cached verdict)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printChecks prints one line per check, "ok  ", "warn" or "FAIL", the
// name padded to 24 characters and the detail, and a summary on stderr;
// it fails with status 1 when a check failed.
func printChecks(stdout, stderr io.Writer, checks []lab.Check) error {
	bad, warn := 0, 0
	for _, c := range checks {
		mark := "ok  "
		switch {
		case !c.OK:
			mark = "FAIL"
			bad++
		case c.Warn:
			mark = "warn"
			warn++
		}
		fmt.Fprintf(stdout, "%s %-24s %s\n", mark, shown(c.Name), shown(c.Detail))
	}
	warned := ""
	if warn > 0 {
		warned = fmt.Sprintf(" (%d warning(s))", warn)
	}
	if bad > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d check(s) failed%s", bad, warned)}
	}
	fmt.Fprintf(stderr, "klab: all checks passed%s\n", warned)
	return nil
}
