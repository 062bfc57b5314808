package textsafe

import "testing"

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[31mred\x1b[0m":                  "[31mred[0m",
		"a\tb\nc\r\x00":                       "a\tb\nc",
		"evil\u202etxt.exe":                   "eviltxt.exe",
		"zero\u200bwidth":                     "zerowidth",
		"µs ± 3":                              "µs ± 3",
		"del\x7f and c1 \u0085":               "del and c1 ",
		"a\tb\nc\r\x00\x1b[1m\u202e\u200b µs": "a\tb\nc[1m µs",
	} {
		if got := Clean(in); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOneLine(t *testing.T) {
	if got, want := OneLine(" a\n\tb  c \x1b"), "a b c"; got != want {
		t.Errorf("OneLine = %q, want %q", got, want)
	}
}
