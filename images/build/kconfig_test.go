package build

import (
	"strings"
	"testing"
)

// fakeKconfig is a small tree's Kconfig: every way an option can fail to
// land that klab explains.
var fakeKconfig = map[string]string{
	"Kconfig": `mainmenu "test"
source "arch/$(SRCARCH)/Kconfig"
source "fs/Kconfig"
config EXPERT
	bool "expert"
config MODULES
	bool "modules"
`,
	"arch/x86/Kconfig": `config X86
	def_bool y
	select HAVE_THING
config HAVE_THING
	bool
config ACPI
	bool "ACPI"
`,
	"fs/Kconfig": `menu "File systems"
config BLOCK
	bool "block"
	help
	  if this text were read as Kconfig, BLOCK would get a condition
	  depends on NOTHING
if BLOCK
source "fs/ext4/Kconfig"
endif
config PVPANIC_MMIO
	tristate "pvpanic"
	depends on HAS_IOMEM && (ACPI || OF) && PVPANIC
config HAS_IOMEM
	def_bool y
config PVPANIC
	bool "pvpanic"
config SYSCTL
	bool "sysctl" if EXPERT
	default y
config FORCED
	bool "forced"
config SELECTOR
	def_bool y
	select FORCED
choice
	prompt "compression"
config KERNEL_GZIP
	bool "gzip"
config KERNEL_XZ
	bool "xz"
endchoice
endmenu
`,
	"fs/ext4/Kconfig": `config EXT4_FS
	tristate "ext4"
	select JBD2
`,
}

func TestMergeRequests(t *testing.T) {
	reqs, err := MergeRequests([]Fragment{
		{Name: "lab", Data: []byte("# comment\nCONFIG_A=y\nCONFIG_B=m\n\nCONFIG_S=\"x y\"\n")},
		{Name: "mine.config", Data: []byte("# CONFIG_A is not set\nCONFIG_N=0x10\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range reqs {
		got = append(got, r.Name+"="+r.Value+"@"+r.Where)
	}
	want := "A=n@mine.config:1 B=m@lab:3 N=0x10@mine.config:2 S=\"x y\"@lab:5"
	if strings.Join(got, " ") != want {
		t.Errorf("requests = %s, want %s", strings.Join(got, " "), want)
	}
	_, err = MergeRequests([]Fragment{{Name: "bad", Data: []byte("CONFIG_A=y\nFUSE_FS=y\nCONFIG_B=\nwhat\n")}})
	for _, w := range []string{"bad:2: \"FUSE_FS=y\"", "(options start with CONFIG_)", "bad:3: CONFIG_B has no value", "bad:4: \"what\": want CONFIG_NAME=value"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}

func TestDroppedOptionReport(t *testing.T) {
	src := t.TempDir()
	for p, data := range fakeKconfig {
		writeTemp(t, src, p, data)
	}
	kc, err := ReadKconfig(src, "x86")
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := MergeRequests([]Fragment{{Name: "frag", Data: []byte(`CONFIG_PVPANIC=y
CONFIG_PVPANIC_MMIO=y
CONFIG_PROC_SYSCTL=y
# CONFIG_SYSCTL is not set
# CONFIG_HAVE_THING is not set
CONFIG_EXT4_FS=m
CONFIG_JBD2=y
# CONFIG_FORCED is not set
CONFIG_KERNEL_XZ=y
CONFIG_BLOCK=y
`)}})
	if err != nil {
		t.Fatal(err)
	}
	// What olddefconfig made of it on a tree without ACPI and EXPERT.
	vals := ReadDotConfig([]byte(`CONFIG_X86=y
CONFIG_HAVE_THING=y
CONFIG_HAS_IOMEM=y
CONFIG_PVPANIC=y
# CONFIG_PVPANIC_MMIO is not set
# CONFIG_ACPI is not set
# CONFIG_EXPERT is not set
CONFIG_SYSCTL=y
CONFIG_BLOCK=y
CONFIG_EXT4_FS=y
CONFIG_SELECTOR=y
CONFIG_FORCED=y
CONFIG_KERNEL_GZIP=y
# CONFIG_KERNEL_XZ is not set
`))
	got := map[string]string{}
	for _, d := range CheckConfig(reqs, vals, kc) {
		got[d.Name] = d.String()
	}
	want := map[string]string{
		"PVPANIC_MMIO": "CONFIG_PVPANIC_MMIO=y (frag:2): got not set: unmet dependency (ACPI || OF) (ACPI=n, OF=n) (fs/Kconfig:10)",
		"PROC_SYSCTL":  "CONFIG_PROC_SYSCTL=y (frag:3): got not set: no such option in this tree's Kconfig (renamed or removed?)",
		"SYSCTL":       "# CONFIG_SYSCTL is not set (frag:4): got CONFIG_SYSCTL=y: its prompt is hidden: it is only settable if EXPERT (EXPERT=n) (fs/Kconfig:17)",
		"HAVE_THING":   "# CONFIG_HAVE_THING is not set (frag:5): got CONFIG_HAVE_THING=y: it is selected by X86=y",
		"JBD2":         "CONFIG_JBD2=y (frag:7): got not set: no such option in this tree's Kconfig (renamed or removed?)",
		"FORCED":       "# CONFIG_FORCED is not set (frag:8): got CONFIG_FORCED=y: it is selected by SELECTOR=y",
		"KERNEL_XZ":    "CONFIG_KERNEL_XZ=y (frag:9): got not set: it is one choice of KERNEL_GZIP, KERNEL_XZ and KERNEL_GZIP won; unset the other one in the fragment (fs/Kconfig:29)",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s:\n got  %s\n want %s", name, got[name], w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected drop %s", got[name])
		}
	}
	// EXT4_FS=m became y with modules off: not a drop. PVPANIC landed.
	// A dropped option inside "if BLOCK" names BLOCK.
	vals["BLOCK"] = "n"
	vals["EXT4_FS"] = "n"
	ds := CheckConfig([]Request{{Name: "EXT4_FS", Value: "y", Where: "f:1"}}, vals, kc)
	if len(ds) != 1 || !strings.Contains(ds[0].Why, "unmet dependency BLOCK (BLOCK=n) (fs/ext4/Kconfig:1)") {
		t.Errorf("ext4 inside if BLOCK: %+v", ds)
	}
	// The error lists them all, and names no flag.
	msg := (&DroppedError{Dropped: CheckConfig(reqs, vals, kc)}).Error()
	if !strings.Contains(msg, "did not land after olddefconfig") || strings.Contains(msg, "--") {
		t.Errorf("DroppedError = %s", msg)
	}
}

func TestEvalKexpr(t *testing.T) {
	vals := map[string]string{"A": "y", "B": "m", "N": "100", "S": `"foo"`}
	for _, tc := range []struct {
		e    string
		want int
	}{
		{"A", 2}, {"B", 1}, {"C", 0}, {"!A", 0}, {"!B", 1}, {"A && B", 1}, {"C || B", 1},
		{"A && (C || !C)", 2}, {"N > 50", 2}, {"N < 50", 0}, {`S = "foo"`, 2}, {`S != "foo"`, 0},
		{"B = m", 2}, {"C = n", 2}, {"y", 2}, {"(A", 2}, // malformed: not blamed
	} {
		if got := evalKexpr(tc.e, vals); got != tc.want {
			t.Errorf("evalKexpr(%q) = %d, want %d", tc.e, got, tc.want)
		}
	}
	if got := splitTopAnd("(A && (B || C)) "); strings.Join(got, "|") != "A|(B || C)" {
		t.Errorf("splitTopAnd = %q", got)
	}
}
