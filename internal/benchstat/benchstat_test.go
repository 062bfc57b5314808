package benchstat

import "testing"

func TestStats(t *testing.T) {
	if m := (Stats{3, 1, 2}).Median(); m != 2 {
		t.Errorf("odd median %v", m)
	}
	if m := (Stats{4, 1, 2, 3}).Median(); m != 2.5 {
		t.Errorf("even median %v", m)
	}
	if s := (Stats{2, 1, 3}).String(); s != "2.00s (min 1.00, max 3.00, n=3)" {
		t.Errorf("String %q", s)
	}
	if (Stats{}).String() != "-" || (Stats{}).Median() != 0 {
		t.Error("empty stats")
	}
}
