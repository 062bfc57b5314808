package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestServeConfigErrors(t *testing.T) {
	var o ServeOptions
	f := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.AddFlags(f)
	if err := f.Parse([]string{"--server", "stuck", "--rule", "lookup=forever", "--interrupt-policy", "sometimes", "--threads", "0", "--request-timeout", "70000", "--hold", "x", "--writeback", "--kernel-passthrough"}); err != nil {
		t.Fatal(err)
	}
	_, err := o.Config("")
	if err == nil {
		t.Fatal("bad flags accepted")
	}
	for _, want := range []string{"--rule", "--interrupt-policy", "--request-timeout", "--hold", "mountpoint: missing", "backing: missing", "writeback and kernel passthrough"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	o = ServeOptions{}
	f = pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.AddFlags(f)
	_ = f.Parse([]string{"--backing", "/b", "--threads", "4", "-o", "allow_other", "--rule", "lookup:x=never", "--server", "stuck"})
	c, err := o.Config("/m")
	if err != nil || c.Threads != 4 || c.Mountpoint != "/m" || len(c.Stuck) != 1 || c.MountOptions[0] != "allow_other" {
		t.Errorf("Config = %+v, %v", c, err)
	}
}

func TestMainUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main("prog", nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "prog fuse serve") {
		t.Errorf("no args: %d %q", code, errb.String())
	}
	errb.Reset()
	if code := Main("prog", []string{"serve", "--backing", "/x"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "MOUNTPOINT") {
		t.Errorf("serve without mount point: %d %q", code, errb.String())
	}
	errb.Reset()
	if code := Main("prog", []string{"check"}, &out, &errb); code != 2 {
		t.Errorf("check without a name: %d", code)
	}
	errb.Reset()
	if code := Main("prog", []string{"check", "nosuch"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "unknown check") {
		t.Errorf("unknown check: %d %q", code, errb.String())
	}
}
