package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"klab/bisect"
	"klab/experiments"
	"klab/internal/textsafe"
	"klab/results"
	"klab/results/bisectreport"
	"klab/results/report"
)

// runEntry is one saved run: a boot or an experiment.
type runEntry struct {
	ID     string    `json:"id"`
	Dir    string    `json:"dir"`
	Kind   string    `json:"kind"`
	Start  time.Time `json:"start"`
	Status string    `json:"status"`
	// ExitCode is a boot or shell run's command status (the manifest's
	// outcome exit_code); nil for experiments.
	ExitCode   *int     `json:"exit_code,omitempty"`
	Experiment string   `json:"experiment,omitempty"`
	Kernels    []string `json:"kernels"`
	Message    string   `json:"message,omitempty"`
}

func listRuns(root string) ([]runEntry, error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var out []runEntry
	for _, e := range ents {
		if !e.IsDir() || !results.ValidName(e.Name()) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if ent, ok := readEntry(dir); ok {
			out = append(out, ent)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func readEntry(dir string) (runEntry, bool) {
	ent := runEntry{ID: filepath.Base(dir), Dir: dir, Kernels: []string{}}
	if bisect.IsRun(dir) {
		ent.Kind = "bisect"
		b, err := bisect.Open(dir)
		if err != nil {
			ent.Status, ent.Message = "unreadable", err.Error()
			return ent, true
		}
		m := b.Manifest
		ent.Start, ent.Status, ent.Experiment, ent.Message = m.Start, m.Status, m.Experiment, m.Message
		ent.Kernels = []string{fmt.Sprintf("%.12s..%.12s", m.GoodCommit, m.BadCommit)}
		if r := b.Result; r != nil && m.Status == bisect.StatusComplete {
			if r.Found && r.FirstBad != nil {
				ent.Status, ent.Message = "found", fmt.Sprintf("first bad commit %.12s %s", r.FirstBad.SHA, r.FirstBad.Subject)
			} else {
				ent.Status, ent.Message = "not-found", r.Reason
			}
		}
		return ent, true
	}
	if experiments.IsRun(dir) {
		s, err := experiments.Open(dir)
		ent.Kind = "experiment"
		if err != nil {
			ent.Status, ent.Message = "unreadable", err.Error()
			return ent, true
		}
		m := s.Manifest
		ent.Start, ent.Status, ent.Experiment, ent.Message = m.Start, m.Status, m.Experiment, m.Message
		for _, k := range m.Kernels {
			ent.Kernels = append(ent.Kernels, k.Ref)
		}
		return ent, true
	}
	m, err := results.ReadManifest(dir)
	if errors.Is(err, os.ErrNotExist) {
		return ent, false
	}
	ent.Kind = "boot"
	if err != nil {
		ent.Status, ent.Message = "unreadable", err.Error()
		return ent, true
	}
	ent.Start, ent.Status, ent.Message = m.Times.Start, string(m.Outcome.Status), m.Outcome.Message
	if ent.Status == "" {
		ent.Status = "incomplete"
	} else {
		code := m.Outcome.ExitCode
		ent.ExitCode = &code
	}
	ent.Kernels = []string{m.Kernel.Name}
	return ent, true
}

// statusText is the run's status as klab runs list shows it: a boot or
// shell run that ended ok but whose command exited non-zero shows that
// status ("exit 3"), since klab boot exited with it.
func (r runEntry) statusText() string {
	if r.Status == string(results.StatusOK) && r.ExitCode != nil && *r.ExitCode != 0 {
		return fmt.Sprintf("exit %d", *r.ExitCode)
	}
	return r.Status
}

// findRun turns RUN (an id, a directory, or "last") into a directory.
func findRun(g *globalOptions, arg string) (string, error) {
	return findRunOfKind(g, arg, "")
}

// findRunOfKind is findRun where last means the newest run of kind
// (experiment, boot, ...; any kind when empty).
func findRunOfKind(g *globalOptions, arg, kind string) (string, error) {
	if arg == "last" || arg == "latest" {
		runs, err := listRuns(g.runsDir)
		if err != nil {
			return "", err
		}
		for i := len(runs) - 1; i >= 0; i-- {
			if kind == "" || runs[i].Kind == kind {
				return runs[i].Dir, nil
			}
		}
		if kind != "" && len(runs) > 0 {
			return "", fmt.Errorf("no %s runs in %s", kind, g.runsDir)
		}
		return "", fmt.Errorf("no runs in %s", g.runsDir)
	}
	if fi, err := os.Stat(arg); err == nil && fi.IsDir() && strings.ContainsRune(arg, os.PathSeparator) {
		return arg, nil
	}
	if !results.ValidName(arg) {
		return "", fmt.Errorf("run %q: want a run id (klab runs list), a run directory, or last", arg)
	}
	dir := filepath.Join(g.runsDir, arg)
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("no run %s in %s (klab runs list shows them)", arg, g.runsDir)
	}
	return dir, nil
}

// previousRun is the run before dir of the same experiment: the newest
// experiment run of g's runs directory whose id sorts before dir's, with
// dir's experiment. It is an error naming what there is when there is
// none.
func previousRun(g *globalOptions, dir string) (string, error) {
	b, ok := readEntry(dir)
	if !ok || b.Kind != "experiment" {
		return "", fmt.Errorf("%s is not an experiment run; klab compare compares runs of one experiment", dir)
	}
	runs, err := listRuns(g.runsDir)
	if err != nil {
		return "", err
	}
	same := 0
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		if r.Kind != "experiment" || r.Experiment != b.Experiment || r.Dir == dir || r.Status == "unreadable" {
			continue
		}
		same++
		if r.ID < b.ID {
			return r.Dir, nil
		}
	}
	if same == 0 {
		return "", fmt.Errorf("%s is the only run of experiment %s in %s, and klab compare needs two: run it again, or name two runs (klab runs list shows them)",
			b.ID, b.Experiment, g.runsDir)
	}
	return "", fmt.Errorf("no run of experiment %s before %s in %s: name the run to compare it with (klab compare RUN_A %s)", b.Experiment, b.ID, g.runsDir, b.ID)
}

func newRunsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List, show and remove saved runs",
		Example: `  klab runs list
  klab runs show last
  klab runs rm 20261201-101500-exp-fuse-transport-a1b2c3
  klab runs gc --keep 20
  klab runs pack last
  klab runs unpack 20261201-101500-exp-fuse-transport-a1b2c3.klab.tar.zst`,
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List saved runs, oldest first",
		Long: `List saved runs, oldest first: each run's id, kind (experiment, or boot: a
guest of klab boot or klab shell), status, experiment and kernels. A boot or
shell run whose command exited non-zero shows that status (exit 3), as klab
boot exited with it; --json gives it as exit_code.`,
		Example: "  klab runs list\n  klab runs list --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			runs, err := listRuns(g.runsDir)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), runs)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tKIND\tSTATUS\tEXPERIMENT\tKERNELS")
			for _, r := range runs {
				exp := r.Experiment
				if exp == "" {
					exp = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Kind, r.statusText(), exp, strings.Join(r.Kernels, " "))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	show := &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run: outcome, kernels, cells, splats and the guest's output",
		Long: `Show a run: for an experiment its outcome, guests and report; for a boot or
shell run its outcome and exit status, kernel, accelerator, the klab command
line that made it (quoted, ready to paste back), splats and the guest's
output.`,
		Example: "  klab runs show last\n  klab runs show 20261201-101500-exp-fuse-transport-a1b2c3",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := findRun(g, args[0])
			if err != nil {
				return badInput(err)
			}
			return showRun(cmd.OutOrStdout(), dir)
		},
	}
	rm := &cobra.Command{
		Use:     "rm RUN...",
		Short:   "Remove runs",
		Example: "  klab runs rm last\n  klab runs rm 20261201-101500-boot-a1b2c3 20261201-102000-boot-d4e5f6",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var dirs []string
			for _, a := range args {
				dir, err := findRun(g, a)
				if err != nil {
					return badInput(err)
				}
				dirs = append(dirs, dir)
			}
			for _, d := range dirs {
				if err := os.RemoveAll(d); err != nil {
					return err
				}
				fmt.Printf("removed %s\n", d)
			}
			return nil
		},
	}
	var keep int
	var older time.Duration
	gc := &cobra.Command{
		Use:   "gc --keep N | --older-than DURATION",
		Short: "Remove old runs: all but the newest N, or those older than DURATION (e.g. 720h)",
		Example: `  klab runs gc --keep 20
  klab runs gc --older-than 720h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if keep < 0 || (keep == 0 && older <= 0) {
				return badInput(errors.New("give --keep N (N at least 1) or --older-than DURATION (e.g. 720h)"))
			}
			runs, err := listRuns(g.runsDir)
			if err != nil {
				return err
			}
			n := 0
			for i, r := range runs {
				drop := keep > 0 && i < len(runs)-keep
				if older > 0 && !r.Start.IsZero() && time.Since(r.Start) > older {
					drop = true
				}
				if !drop {
					continue
				}
				if err := os.RemoveAll(r.Dir); err != nil {
					return err
				}
				n++
			}
			fmt.Printf("removed %d run(s), kept %d\n", n, len(runs)-n)
			return nil
		},
	}
	gc.Flags().IntVar(&keep, "keep", 0, "keep the newest N runs")
	gc.Flags().DurationVar(&older, "older-than", 0, "remove runs that started longer ago than this")
	cmd.AddCommand(list, show, rm, gc, newRunsPackCommand(g), newRunsUnpackCommand(g))
	return cmd
}

// showRun prints a run: for an experiment its report, for a boot its
// manifest's facts, splats and the guest's output, decoded.
func showRun(w io.Writer, dir string) error {
	if bisect.IsRun(dir) {
		b, err := bisect.Open(dir)
		if err != nil {
			return err
		}
		m := b.Manifest
		fmt.Fprintf(w, "run %s: bisection of %s, %s", m.RunID, m.Experiment, m.Status)
		if m.Message != "" {
			fmt.Fprintf(w, " (%s)", textsafe.Clean(m.Message))
		}
		fmt.Fprintf(w, "\ncommand: %s\n\n", strings.Join(m.Command, " "))
		return bisectreport.Text(w, b.Report())
	}
	if experiments.IsRun(dir) {
		s, err := experiments.Open(dir)
		if err != nil {
			return err
		}
		m := s.Manifest
		fmt.Fprintf(w, "run %s: experiment %s, %s", m.RunID, m.Experiment, m.Status)
		if m.Message != "" {
			fmt.Fprintf(w, " (%s)", textsafe.Clean(m.Message))
		}
		if s.IsSuite() {
			fmt.Fprintf(w, ", %s configuration %s\n\n", m.Suite.Name, m.Suite.Config)
			return s.WriteSuiteReport(w, "text")
		}
		fmt.Fprintf(w, "\n%d guest(s):\n", len(m.Guests))
		for _, gr := range m.Guests {
			fmt.Fprintf(w, "  %s: %s, %s, boot-to-agent %.1fs, %d splat(s)\n", gr.Dir, m.Kernels[gr.Kernel].Ref, gr.Outcome.Status,
				float64(gr.BootToAgentMs)/1000, len(gr.Splats))
		}
		fmt.Fprintln(w)
		return report.Text(w, s.Report())
	}
	m, err := results.ReadManifest(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "run %s: %s", m.RunID, m.Outcome.Status)
	if m.Outcome.Message != "" {
		fmt.Fprintf(w, " (%s)", textsafe.Clean(m.Outcome.Message))
	}
	// The command is klab's argv, quoted so that it can be pasted back;
	// control characters (but newlines and tabs, inside their quotes)
	// never reach the terminal.
	fmt.Fprintf(w, ", exit %d\nkernel %s %s (%s)\naccel %s, qemu %s\ncommand: %s\n", m.Outcome.ExitCode, m.Kernel.Name,
		shown(m.Kernel.Version), m.Kernel.ID, m.Accel, shown(m.QEMU.Version), textsafe.Clean(shellJoin(m.Command)))
	var splats []struct {
		Title string `json:"title"`
	}
	if data, err := os.ReadFile(filepath.Join(dir, "splats.json")); err == nil {
		_ = json.Unmarshal(data, &splats)
	}
	fmt.Fprintf(w, "%d kernel splat(s)\n", len(splats))
	for _, s := range splats {
		fmt.Fprintf(w, "  %s\n", textsafe.Clean(s.Title))
	}
	out, err := guestOutput(dir, 64<<10)
	if err == nil && out != "" {
		fmt.Fprintf(w, "guest output:\n%s", out)
		if !strings.HasSuffix(out, "\n") {
			fmt.Fprintln(w)
		}
	}
	return nil
}

// guestOutput is up to limit bytes of a run's guest output (stdout and
// stderr as they came), cleaned for the terminal.
func guestOutput(dir string, limit int) (string, error) {
	out, more, err := results.ReadOutput(dir, limit)
	if err != nil {
		return "", err
	}
	s := textsafe.Clean(string(out))
	if more {
		s += "\n[output cut at " + fmt.Sprint(limit) + " bytes]\n"
	}
	return s, nil
}
