package intr

import (
	"testing"
	"time"

	"klab/guest/fuse/abi"
)

func TestParseHold(t *testing.T) {
	h, err := ParseHold("lookup:held*=2s")
	if err != nil || h.Select.Op != abi.OpLookup || h.Select.Name != "held*" || h.For != 2*time.Second {
		t.Fatalf("ParseHold: %+v, %v", h, err)
	}
	if again, err := ParseHold(h.String()); err != nil || again != h {
		t.Errorf("round trip via %q: %+v, %v", h.String(), again, err)
	}
	for _, bad := range []string{"lookup", "lookup=soon", "bogus=1s", "read=-1s"} {
		if _, err := ParseHold(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
