package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSpecMessages: klab experiments validate names, for each mistake of
// a spec, its place, its field, what it got and what the typo meant, and
// one typo is one message.
func TestSpecMessages(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, spec string
		want       []string // every line of stderr, after the file's path
	}{
		{"misspelt field", "name: t\nround: 3\nchecks:\n  - {name: c, run: \"true\"}\n", []string{
			`:2:1: experiment: unknown field "round" (did you mean "rounds"?), want one of name, description, reference, requires, vm, rounds, `,
		}},
		{"wrong types", "name: t\nrounds: many\nvm: {tcg_multithread: maybe}\nchecks:\n  - {name: c, run: \"true\", timeout_s: 1.5, args: x}\n", []string{
			`:2:9: rounds: want an integer, got "many"`,
			`:3:23: vm.tcg_multithread: want true or false, got "maybe"`,
			`:5:39: checks[0].timeout_s: want an integer, got "1.5"`,
			`:5:50: checks[0].args: want a list`,
		}},
		{"misspelt reference", "name: t\nparams:\n  jobs: [1, 2]\nworkloads:\n  - {name: w, pattern: create, dir: /tmp/w, jobs: \"${jbos}\", files: 10}\n", []string{
			`:5:51: ${jbos}: no such parameter (did you mean ${jobs}?), want one of jobs`,
		}},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
		if err := os.WriteFile(path, []byte(tc.spec), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runCLI(t, "experiments", "validate", path)
		lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(stderr, "klab: "), "\n"), "\n")
		ok := code == exitBadInput && len(lines) == len(tc.want)
		for i := 0; ok && i < len(lines); i++ {
			ok = strings.HasPrefix(lines[i], path+tc.want[i])
		}
		if !ok {
			t.Errorf("%s: status %d, stderr:\n%s\nwant status 2 and %d line(s):\n%s", tc.name, code, stderr, len(tc.want), strings.Join(tc.want, "\n"))
		}
	}
}
