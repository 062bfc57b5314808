// Package suggest owns klab's "did you mean" for a name the user got
// wrong: a flag, a spec field, a parameter in ${...}. It picks the known
// names nearest to the one given, by edit distance with transpositions,
// ignoring case and the difference between '-' and '_', and gives none
// when nothing is near enough to be a typo.
package suggest

import "strings"

// most is the most names Nearest returns.
const most = 3

// Nearest returns the names among known that word is likely a typo of,
// in known's order, at most three: those at the smallest edit distance
// from word when it is small for word's length (none for one or two
// characters, 1 up to five, 2 up to eight, 3 beyond), else those that word is a
// prefix of (at least three characters of it). A name equal to word is
// no suggestion; an empty result means nothing is near.
func Nearest(word string, known []string) []string {
	w := fold(word)
	if w == "" {
		return nil
	}
	limit := 0
	switch n := len([]rune(w)); {
	case n > 8:
		limit = 3
	case n > 5:
		limit = 2
	case n > 2:
		limit = 1
	}
	best := limit + 1
	var out []string
	for _, k := range known {
		if k == word {
			continue
		}
		d := Distance(w, fold(k))
		switch {
		case d > limit:
		case d < best:
			best, out = d, []string{k}
		case d == best && !contains(out, k):
			out = append(out, k)
		}
	}
	if len(out) == 0 && len([]rune(w)) >= 3 {
		for _, k := range known {
			if k != word && strings.HasPrefix(fold(k), w) && !contains(out, k) {
				out = append(out, k)
			}
		}
	}
	if len(out) > most {
		out = out[:most]
	}
	return out
}

// fold is s as Nearest compares it: lower case, '-' as '_'.
func fold(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), "-", "_")
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// Distance is the number of single-character insertions, deletions,
// substitutions and swaps of two neighbours that turn a into b (the
// optimal string alignment distance), counted in runes.
func Distance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// d[i][j] is the distance between s[:i] and t[:j]; three rows kept.
	prev2 := make([]int, len(t)+1)
	prev := make([]int, len(t)+1)
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}
