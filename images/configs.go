package images

import (
	"embed"
	"fmt"
	"strings"
)

// Config fragments shipped with klab (images/configs). Read-only.
//
//go:embed configs
var configFS embed.FS

// ConfigFragmentNames lists the config fragments shipped with klab.
func ConfigFragmentNames() []string {
	des, _ := configFS.ReadDir("configs")
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// ConfigFragment returns the shipped config fragment called name ("lab",
// "debug").
func ConfigFragment(name string) ([]byte, error) {
	if strings.ContainsAny(name, `/\`) || name == "" || name[0] == '.' {
		return nil, fmt.Errorf("no shipped config fragment %q", name)
	}
	data, err := configFS.ReadFile("configs/" + name)
	if err != nil {
		return nil, fmt.Errorf("no shipped config fragment %q; klab ships: %s (or give a path to a fragment file)",
			name, strings.Join(ConfigFragmentNames(), ", "))
	}
	return data, nil
}
