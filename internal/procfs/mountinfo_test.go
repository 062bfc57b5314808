package procfs

import "testing"

func TestUnescapeMountinfo(t *testing.T) {
	if got := UnescapeMountinfo(`/a\040b\011c`); got != "/a b\tc" {
		t.Errorf("unescape: %q", got)
	}
	if got := UnescapeMountinfo(`a\134b\011c\`); got != "a\\b\tc\\" {
		t.Errorf("unescapeOctal = %q", got)
	}
	if got := UnescapeMountinfo(`/end\040`); got != "/end " {
		t.Errorf("an escape at the end: %q", got)
	}
}
