package splat

// Group is the reports of one run that share a title.
type Group struct {
	// Title is the reports' title.
	Title string `json:"title"`
	// Type is the type of the first report.
	Type Type `json:"type"`
	// Count is how many reports have the title.
	Count int `json:"count"`
	// Fatal is true when any of them is fatal.
	Fatal bool `json:"fatal,omitempty"`
	// Corrupted is true when all of them are corrupted, so that the title
	// itself is in doubt.
	Corrupted bool `json:"corrupted,omitempty"`
	// First is the first report with the title; prefer one that is not
	// corrupted.
	First Report `json:"first"`
}

// Dedup groups reports by title, in the order each title first appears.
func Dedup(reports []Report) []Group {
	var out []Group
	idx := map[string]int{}
	for _, r := range reports {
		i, ok := idx[r.Title]
		if !ok {
			idx[r.Title] = len(out)
			out = append(out, Group{Title: r.Title, Type: r.Type, Corrupted: true, First: r})
			i = len(out) - 1
		}
		g := &out[i]
		g.Count++
		g.Fatal = g.Fatal || r.Fatal
		if !r.Corrupted {
			if g.Corrupted {
				g.First = r
			}
			g.Corrupted = false
		}
	}
	return out
}

// Diff is how the splats of runs B differ from those of runs A (say, a
// patched kernel against its base), by title.
type Diff struct {
	// New are the titles seen in B and not in A.
	New []DiffEntry `json:"new"`
	// Gone are the titles seen in A and not in B.
	Gone []DiffEntry `json:"gone"`
	// Both are the titles seen in both.
	Both []DiffEntry `json:"both"`
}

// DiffEntry is one title of a Diff and how often each side saw it.
type DiffEntry struct {
	// Title is the reports' title.
	Title string `json:"title"`
	// Type is the reports' type (B's when both have it).
	Type Type `json:"type"`
	// CountA and CountB are how many reports have the title in A and B.
	CountA int `json:"count_a"`
	CountB int `json:"count_b"`
	// Fatal is true when any report with the title is fatal.
	Fatal bool `json:"fatal,omitempty"`
	// Corrupted is true when every report with the title is corrupted.
	Corrupted bool `json:"corrupted,omitempty"`
}

// Compare diffs reports a (for example every run of the base kernel,
// concatenated) against reports b (every run of the patched kernel). New
// and Both follow the order of b, Gone the order of a. The result has
// empty, not nil, slices.
func Compare(a, b []Report) Diff {
	ga, gb := Dedup(a), Dedup(b)
	inA := make(map[string]Group, len(ga))
	for _, g := range ga {
		inA[g.Title] = g
	}
	inB := make(map[string]bool, len(gb))
	d := Diff{New: []DiffEntry{}, Gone: []DiffEntry{}, Both: []DiffEntry{}}
	for _, g := range gb {
		inB[g.Title] = true
		e := DiffEntry{Title: g.Title, Type: g.Type, CountB: g.Count, Fatal: g.Fatal, Corrupted: g.Corrupted}
		if old, ok := inA[g.Title]; ok {
			e.CountA = old.Count
			e.Fatal = e.Fatal || old.Fatal
			e.Corrupted = e.Corrupted && old.Corrupted
			d.Both = append(d.Both, e)
			continue
		}
		d.New = append(d.New, e)
	}
	for _, g := range ga {
		if !inB[g.Title] {
			d.Gone = append(d.Gone, DiffEntry{Title: g.Title, Type: g.Type, CountA: g.Count, Fatal: g.Fatal, Corrupted: g.Corrupted})
		}
	}
	return d
}
