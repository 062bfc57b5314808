package fstests

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"klab/guest/proto"
)

// configs are the fstests configurations klab knows by name.
var configs = map[string]struct {
	config proto.FstestsConfig
	help   string
}{
	"ext4": {proto.FstestsConfig{FSType: proto.FstestsExt4},
		"ext4 on two brd ram disks (TEST and SCRATCH)"},
	"fuse-klab-dev": {proto.FstestsConfig{FSType: proto.FstestsFUSE, FUSE: &proto.FstestsFUSEConfig{Server: proto.FstestsServerKlab, Transport: proto.FUSETransportDev}},
		"klab's passthrough server over /dev/fuse, backed by ext4 on brd"},
	"fuse-klab-uring": {proto.FstestsConfig{FSType: proto.FstestsFUSE, FUSE: &proto.FstestsFUSEConfig{Server: proto.FstestsServerKlab, Transport: proto.FUSETransportURing}},
		"klab's passthrough server over io_uring (Linux 6.14+), backed by ext4 on brd"},
	"fuse-hp-dev": {proto.FstestsConfig{FSType: proto.FstestsFUSE, FUSE: &proto.FstestsFUSEConfig{Server: proto.FstestsServerPassthroughHP, Transport: proto.FUSETransportDev}},
		"libfuse 3.18's passthrough_hp over /dev/fuse, backed by ext4 on brd"},
	"fuse-hp-uring": {proto.FstestsConfig{FSType: proto.FstestsFUSE, FUSE: &proto.FstestsFUSEConfig{Server: proto.FstestsServerPassthroughHP, Transport: proto.FUSETransportURing}},
		"libfuse 3.18's passthrough_hp over io_uring (Linux 6.14+), backed by ext4 on brd"},
}

// Configs returns the names of the configurations, sorted.
func Configs() []string {
	names := make([]string, 0, len(configs))
	for n := range configs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ConfigHelp returns one line per configuration, for --help.
func ConfigHelp() string {
	var b strings.Builder
	for _, n := range Configs() {
		fmt.Fprintf(&b, "  %-16s %s\n", n, configs[n].help)
	}
	return b.String()
}

// Config returns the configuration called name, with mount options
// (mount(8)'s -o for ext4, the FUSE mount's for fuse) and mkfs options
// (ext4 only) added. An unknown name is an error that lists the known ones.
func Config(name, mountOptions, mkfsOptions string) (proto.FstestsConfig, error) {
	c, ok := configs[name]
	if !ok {
		return proto.FstestsConfig{}, fmt.Errorf("unknown fstests configuration %q: one of %s", name, strings.Join(Configs(), ", "))
	}
	cfg := c.config
	if cfg.FUSE != nil {
		f := *cfg.FUSE
		cfg.FUSE = &f
	}
	if mkfsOptions != "" && cfg.FSType != proto.FstestsExt4 {
		return proto.FstestsConfig{}, fmt.Errorf("mkfs options apply to ext4 configurations, not %s (a FUSE configuration's backing ext4 is klab's)", name)
	}
	for _, o := range []struct{ what, v string }{{"mount options", mountOptions}, {"mkfs options", mkfsOptions}} {
		if i := strings.IndexFunc(o.v, func(r rune) bool { return !optionRune(r) }); i >= 0 {
			return proto.FstestsConfig{}, fmt.Errorf("%s %q: %q at byte %d is not allowed (letters, digits, space and _ = , . : / + - ^)", o.what, o.v, o.v[i:i+1], i)
		}
	}
	cfg.Name, cfg.MountOptions, cfg.MkfsOptions = name, strings.TrimSpace(mountOptions), strings.TrimSpace(mkfsOptions)
	return cfg, nil
}

// NeedsPassthroughHP says whether cfg's mounts run libfuse's
// passthrough_hp, which the guest's initramfs must then carry.
func NeedsPassthroughHP(cfg proto.FstestsConfig) bool {
	return cfg.FUSE != nil && cfg.FUSE.Server == proto.FstestsServerPassthroughHP
}

// TestDirs are the fstests test directories that apply to cfg: generic
// for every file system, and the file system's own (fstests has no
// tests/fuse).
func TestDirs(cfg proto.FstestsConfig) []string {
	if cfg.FSType == proto.FstestsExt4 {
		return []string{"generic", "ext4"}
	}
	return []string{"generic"}
}

// optionRune says whether r may be in mount or mkfs options: what such
// options are made of, and nothing a shell would read.
func optionRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(" _=,.:/+-^", r)
}

// appliesTo says whether test (generic/013) is in one of cfg's test
// directories.
func appliesTo(cfg proto.FstestsConfig, test string) bool {
	d, _, _ := strings.Cut(test, "/")
	return slices.Contains(TestDirs(cfg), d)
}

// CheckTests refuses the tests named (not globs) that are not in one of
// cfg's test directories, such as ext4/001 on a FUSE configuration: it
// needs no fstests tree, so a command can refuse them before building
// one.
func CheckTests(cfg proto.FstestsConfig, tests []string) error {
	var bad []string
	for _, t := range tests {
		if strings.Contains(t, "/") && !strings.ContainsAny(t, "*?[") && !appliesTo(cfg, t) {
			bad = append(bad, t)
		}
	}
	switch len(bad) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s does not apply to configuration %s: its tests are those of %s", bad[0], cfg.Name, strings.Join(TestDirs(cfg), " and "))
	}
	return fmt.Errorf("%s do not apply to configuration %s: its tests are those of %s", strings.Join(bad, ", "), cfg.Name, strings.Join(TestDirs(cfg), " and "))
}
