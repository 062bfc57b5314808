package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"klab/results/splat"
)

func newSplatsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "splats",
		Short: "Find kernel splats in console logs",
		Long: `Kernel splats are the reports a kernel prints about itself: panics, oopses,
BUGs, WARNINGs, KASAN/KFENCE/KMSAN/UBSAN reports, lockdep reports, hung
tasks, lockups, RCU stalls, list corruption, refcount warnings and kmemleak
reports. klab titles each one in syzkaller's style ("WARNING in
fuse_uring_cmd", "possible deadlock in fuse_dev_do_read") so that equal
titles mean the same bug across runs and kernels.`,
		Example: `  klab splats parse console.log
  dmesg | klab splats parse -
  klab splats parse --json run/console.log`,
	}
	cmd.AddCommand(newSplatsParseCommand(g))
	return cmd
}

type splatsParseOptions struct {
	json  bool
	fail  bool
	allow []string
}

func newSplatsParseCommand(_ *globalOptions) *cobra.Command {
	o := &splatsParseOptions{}
	cmd := &cobra.Command{
		Use:   "parse FILE...",
		Short: "Print the splats found in console logs",
		Long: `Read console logs (klab's console.log, a serial capture, dmesg output, ...)
and print the splats in them: one title per line, prefixed with the file name
when there are several files, or with --json a JSON array of objects with
"title", "type", "corrupted", "frames", "report" and more. FILE "-" is
standard input. Logs of any size are streamed with bounded memory, and each
splat is printed as soon as it is complete.

With --fail, the exit status says whether the logs would fail a klab boot:
1 when a splat fails the default policy (any BUG, sanitizer or lockdep
report, hang, panic, or a WARNING that no --allow-warning matches), 0
otherwise; the failing titles are printed on stderr. Use it to gate a CI
step on a console log or dmesg.`,
		Example: `  klab splats parse ~/.local/share/klab/runs/20261130-080018-boot-952920/console.log
  dmesg | klab splats parse -
  klab splats parse --json console.log | jq -r '.[] | select(.corrupted | not) | .title'
  dmesg | klab splats parse --fail - || echo "the kernel reported a failing splat"
  klab splats parse --fail --allow-warning 'WARNING in fuse_' console.log`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSplatsParse(cmd.Context(), o, args, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print a JSON array of reports")
	cmd.Flags().BoolVar(&o.fail, "fail", false, "exit 1 when a splat fails the default policy, as klab boot would fail the run")
	cmd.Flags().StringArrayVar(&o.allow, "allow-warning", nil, "with --fail, a WARNING title substring (or /regexp/) that does not fail (repeatable)")
	return cmd
}

// parsedSplat is one report of `klab splats parse --json`.
type parsedSplat struct {
	File string `json:"file"`
	splat.Report
}

func runSplatsParse(ctx context.Context, o *splatsParseOptions, files []string, stdin io.Reader, stdout io.Writer) error {
	var policy *splat.Policy
	if o.fail {
		p, err := splat.NewPolicy(splat.PolicyConfig{Fail: splat.DefaultFail(), Allow: o.allow})
		if err != nil {
			return badInput(fmt.Errorf("--allow-warning: %w", err))
		}
		policy = p
	} else if len(o.allow) > 0 {
		return badInput(fmt.Errorf("--allow-warning only applies with --fail"))
	}
	// Every file is there before any is parsed.
	var missing []error
	for _, name := range files {
		if name == "-" {
			continue
		}
		if fi, err := os.Stat(name); err != nil {
			missing = append(missing, err)
		} else if fi.IsDir() {
			missing = append(missing, fmt.Errorf("%s: a directory; want a console log or dmesg file (or - for standard input)", name))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return badInput(err)
	}
	var reports []splat.Report
	out := bufio.NewWriter(stdout)
	n := 0
	if o.json {
		fmt.Fprint(out, "[")
	}
	for _, name := range files {
		err := withInput(name, stdin, func(r io.Reader) error {
			return splat.ParseReader(ctx, r, func(rep splat.Report) error {
				n++
				if policy != nil {
					// What the policy reads, without the report's text.
					reports = append(reports, splat.Report{Type: rep.Type, Title: rep.Title, Line: rep.Line, Fatal: rep.Fatal})
				}
				if o.json {
					if n > 1 {
						fmt.Fprint(out, ",")
					}
					fmt.Fprint(out, "\n  ")
					var b bytes.Buffer
					enc := json.NewEncoder(&b)
					enc.SetEscapeHTML(false)
					enc.SetIndent("  ", "  ")
					if err := enc.Encode(parsedSplat{File: name, Report: rep}); err != nil {
						return fmt.Errorf("encode report: %w", err)
					}
					out.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
				} else if len(files) > 1 {
					fmt.Fprintf(out, "%s: %s\n", name, rep.Title)
				} else {
					fmt.Fprintln(out, rep.Title)
				}
				return out.Flush()
			})
		})
		if err != nil {
			return fmt.Errorf("parse %s: %w", name, err)
		}
	}
	if o.json {
		if n > 0 {
			fmt.Fprint(out, "\n")
		}
		fmt.Fprintln(out, "]")
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if policy == nil {
		return nil
	}
	v := policy.Evaluate(reports)
	if !v.Failed {
		return nil
	}
	titles := make([]string, len(v.Failures))
	for i, f := range v.Failures {
		titles[i] = shown(f.Title)
	}
	return &exitError{code: 1, msg: fmt.Sprintf("%d splat(s) fail the default policy: %s", len(titles), strings.Join(titles, "; "))}
}

// withInput calls f with the file name, or stdin for "-".
func withInput(name string, stdin io.Reader, f func(io.Reader) error) error {
	if name == "-" {
		return f(stdin)
	}
	file, err := os.Open(name)
	if err != nil {
		return err
	}
	defer file.Close()
	return f(file)
}
