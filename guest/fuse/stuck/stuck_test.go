package stuck

import (
	"testing"
	"time"

	"klab/guest/fuse/abi"
)

func TestParseRule(t *testing.T) {
	for in, want := range map[string]Rule{
		"lookup:stuck=never":      {Select: sel(abi.OpLookup, "stuck"), Action: Never},
		"getattr=delay:5s":        {Select: sel(abi.OpGetattr, ""), Action: Delay, Delay: 5 * time.Second},
		"*:slow*=after-abort":     {Select: sel(0, "slow*"), Action: AfterAbort},
		"FUSE_READ:x=delay:250ms": {Select: sel(abi.OpRead, "x"), Action: Delay, Delay: 250 * time.Millisecond},
	} {
		got, err := ParseRule(in)
		if err != nil || got != want {
			t.Errorf("ParseRule(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, err := ParseRule(got.String()); err != nil || again != got {
			t.Errorf("round trip of %q via %q: %+v, %v", in, got.String(), again, err)
		}
	}
	for _, bad := range []string{"lookup", "lookup=forever", "nosuchop=never", "read=delay:soon", "read=delay:-1s", "lookup:[=never"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted", bad)
		}
	}
}
