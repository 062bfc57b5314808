package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"klab/experiments"
	"klab/internal/specfile"
)

func newExperimentsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "experiments",
		Short: "List, show and validate experiment files",
		Example: `  klab experiments list
  klab experiments show fuse-transport
  klab experiments validate experiments/*.yaml my-exp.yaml`,
	}
	var asJSON bool
	list := &cobra.Command{
		Use:     "list",
		Short:   "List klab's experiments",
		Example: "  klab experiments list\n  klab experiments list --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			list := listExperiments()
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			for _, e := range list {
				if e.Error != "" {
					fmt.Fprintf(tw, "%s\t(invalid: %s)\n", e.Name, e.Error)
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\n", e.Name, e.Description)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(list, &cobra.Command{
		Use:     "show NAME|FILE",
		Short:   "Print an experiment's spec",
		Example: "  klab experiments show fuse-transport",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := experiments.Find(args[0])
			if err != nil {
				return badInput(err)
			}
			fmt.Printf("# %s (sha256 %.12s)\n", f.Path, f.SHA256)
			_, err = os.Stdout.Write(f.Data)
			return err
		},
	}, &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check experiment files and report every error with file:line:col",
		Long: `Check experiment files without running them. Every problem of every file is
reported, each with its file, line and column, what was found and what is
allowed. A file that needs a kernel feature without listing it in requires
(a server over io_uring needs fuse-io-uring) gets a note: klab requires it
all the same, and a kernel without it is skipped. A file that is valid but
likely wrong gets a warning with its position: a check whose run names the
server's mountpoint without mount: true runs after the server is unmounted
and would see the bare mountpoint directory. Exit status 2 when any file is
invalid; warnings alone leave it 0.`,
		Example: "  klab experiments validate experiments/*.yaml",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var msgs []string
			for _, a := range args {
				f, err := experiments.Find(a)
				if err != nil {
					var se *specfile.Error
					if !errors.As(err, &se) {
						err = fmt.Errorf("%s: %w", a, err)
					}
					msgs = append(msgs, err.Error())
					continue
				}
				fmt.Printf("%s: ok (%s, %d point(s) in its matrix)\n", f.Path, f.Spec.Name, len(f.Points()))
				for _, n := range impliedNotes(f) {
					fmt.Printf("%s: note: %s\n", f.Path, n)
				}
				for _, w := range specWarnings(f) {
					fmt.Println(w)
				}
			}
			if len(msgs) > 0 {
				return &exitError{code: exitBadInput, msg: strings.Join(msgs, "\n")}
			}
			return nil
		},
	})
	return cmd
}

// experimentEntry is one line of klab experiments list.
type experimentEntry struct {
	Name        string `json:"name"`
	Path        string `json:"path,omitempty"`
	Description string `json:"description,omitempty"`
	// Error says why a shipped experiment does not load.
	Error string `json:"error,omitempty"`
}

// listExperiments describes klab's shipped experiments.
func listExperiments() []experimentEntry {
	var out []experimentEntry
	for _, n := range experiments.Shipped() {
		f, err := experiments.Find(n)
		if err != nil {
			out = append(out, experimentEntry{Name: n, Error: err.Error()})
			continue
		}
		out = append(out, experimentEntry{Name: n, Path: f.Path, Description: f.Spec.Description})
	}
	return out
}

// specWarnings are f's warnings, one line each: file:line:col: warning:
// what is likely wrong.
func specWarnings(f *experiments.File) []string {
	var out []string
	for _, p := range f.Warnings {
		p.Msg = "warning: " + p.Msg
		out = append(out, p.Error())
	}
	return out
}

// impliedNotes say which features f requires without listing them, and
// why: a kernel without them is skipped.
func impliedNotes(f *experiments.File) []string {
	var out []string
	imp := f.Spec.Requires.Implied
	for _, feat := range slices.Sorted(maps.Keys(imp)) {
		out = append(out, fmt.Sprintf("requires %s, for %s: a kernel without it is skipped (write requires: {features: [%s]} to say so)", feat, imp[feat], feat))
	}
	return out
}
