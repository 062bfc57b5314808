package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"klab/lab"
	"klab/vm"
)

// doctorOptions are the flags of klab doctor.
type doctorOptions struct {
	probe  bool
	asJSON bool
}

// policy is the probe policy the flags ask for: --probe proves KVM
// afresh, --probe=false never boots, no --probe uses a cached verdict
// younger than lab.VerdictMaxAge.
func (o *doctorOptions) policy(probeSet bool) lab.ProbePolicy {
	switch {
	case !probeSet:
		return lab.ProbeIfStale
	case o.probe:
		return lab.ProbeAlways
	}
	return lab.ProbeNever
}

func newDoctorCommand(g *globalOptions) *cobra.Command {
	o := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the host: QEMU, KVM, Debian suites, cache",
		Long: fmt.Sprintf(`Check what klab needs on this host: QEMU and its version; whether /dev/kvm is
present and actually runs a guest; whether the Debian suites are reachable
through the host's mirror; where the guest parts come from; and the cache
directory with its free space.

KVM is proved by a probe boot of the newest cached kernel under KVM (at most
%s; when KVM fails, the same kernel is booted under TCG, at most %s,
to tell a broken KVM from a broken kernel). The verdict is cached for this
host kernel, CPU and QEMU binary, and runs use it. doctor shows the cached
verdict, with its date, when it is younger than %d days, and probes when
there is none, when it is older, or when the host kernel, CPU or QEMU binary
changed. --probe proves KVM afresh; --probe=false never boots. doctor says
on stderr what it does before any step that may take seconds.

Each line is a mark, the check and what was found: "ok", "warn" (klab works,
but not as well as it could: guests run under TCG, several times slower than
KVM) or "FAIL". Exit status 1 when a check failed; warnings do not count.`,
			vm.ProbeTimeout, vm.TCGProbeTimeout, int(lab.VerdictMaxAge/(24*time.Hour))),
		Example: "  klab doctor\n  klab doctor --probe\n  klab doctor --probe=false --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			lo := g.labOptions()
			checks := lo.Doctor(cmd.Context(), lab.DoctorOptions{Probe: o.policy(cmd.Flags().Changed("probe"))})
			if o.asJSON {
				return writeJSON(cmd.OutOrStdout(), checks)
			}
			return printChecks(cmd.OutOrStdout(), os.Stderr, checks)
		},
	}
	cmd.Flags().BoolVar(&o.probe, "probe", false, "prove KVM afresh with a probe boot (default: only without a recent cached verdict; false: never)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
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
