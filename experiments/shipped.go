package experiments

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// shipped are the experiments that come with klab, built into the
// binary so that an installed klab finds them by name anywhere.
//
//go:embed *.yaml
var shipped embed.FS

// ShippedDir is how shipped experiments are named in messages and
// manifests.
const ShippedDir = "experiments"

// Shipped lists the names of the shipped experiments.
func Shipped() []string {
	ents, _ := fs.ReadDir(shipped, ".")
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Find loads an experiment by path or, when no such file exists, by the
// name of a shipped experiment.
func Find(nameOrPath string) (*File, error) {
	if fi, err := os.Stat(nameOrPath); err == nil && !fi.IsDir() {
		return LoadFile(nameOrPath)
	}
	name := strings.TrimSuffix(path.Base(nameOrPath), ".yaml")
	if !strings.ContainsAny(nameOrPath, "/") || strings.HasPrefix(nameOrPath, ShippedDir+"/") {
		if data, err := shipped.ReadFile(name + ".yaml"); err == nil {
			return Load(ShippedDir+"/"+name+".yaml", data)
		}
	}
	return nil, fmt.Errorf("no experiment %q: not a file, and not one of klab's (%s)", nameOrPath, strings.Join(Shipped(), ", "))
}
