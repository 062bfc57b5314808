package profile

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Defaults of IcicleOptions.
const (
	// DefaultIcicleWidth is the default of IcicleOptions.Width.
	DefaultIcicleWidth = 1200
	// DefaultMinFrac is the default of IcicleOptions.MinFrac.
	DefaultMinFrac = 0.002
	// DefaultMaxDepth is the default of IcicleOptions.MaxDepth.
	DefaultMaxDepth = 64
)

// Geometry of an icicle chart, in pixels.
const (
	rowHeight   = 16   // distance between the tops of two rows
	frameHeight = 15   // height of a frame's rectangle
	pad         = 10   // left, right and bottom margins
	titleHeight = 28   // space above the chart when it has a title
	textInset   = 3    // space left of a label
	textBase    = 11.5 // baseline of a label below its rectangle's top
	charWidth   = 7    // assumed width of one character at font-size 11
	minChars    = 3    // labels are dropped when fewer characters fit
)

// IcicleOptions shape an icicle chart. The zero value gives the defaults.
type IcicleOptions struct {
	// Title is drawn above the chart, if not empty.
	Title string
	// Width is the width of the chart in pixels; zero or less means
	// DefaultIcicleWidth (1200). It is at least 100.
	Width int
	// MinFrac is the share of all samples under which a frame, and
	// everything below it, is left out; zero or less means DefaultMinFrac
	// (0.002). Each row thus holds at most 1/MinFrac frames.
	MinFrac float64
	// MaxDepth is the number of rows drawn below the root; zero or less
	// means DefaultMaxDepth (64).
	MaxDepth int
	// Highlight are function names drawn in blue instead of the warm hues.
	Highlight []string
}

// node is one frame of the tree of stacks.
type node struct {
	name     string
	value    int64
	children map[string]*node
}

// child returns the child of n with the name, adding it if needed.
func (n *node) child(name string) *node {
	if c, ok := n.children[name]; ok {
		return c
	}
	if n.children == nil {
		n.children = make(map[string]*node)
	}
	c := &node{name: name}
	n.children[name] = c
	return c
}

// Icicle writes an icicle chart of p to w as SVG: a root rectangle "all" for
// all samples at the top, and below each frame its callees, each as wide as
// its share of the samples. The first row below the root are the processes.
// Frames of the same name under the same caller are merged, and callees are
// ordered by name. Each frame has a tooltip "FUNC: N samples (X.X%)" and a
// label clipped to its width (cut labels end in ".."). Colours are warm hues
// derived from the function name, the same in every chart, and blue for the
// highlighted functions.
//
// The output is one self-contained <svg> element, without scripts, styles
// or external references, fit to be inlined into an HTML page. Names are
// XML-escaped and stripped of control characters. Coordinates are rounded
// to one decimal, and MinFrac and MaxDepth bound the number of rectangles.
func Icicle(w io.Writer, p *Profile, o IcicleOptions) error {
	if o.Width <= 0 {
		o.Width = DefaultIcicleWidth
	}
	o.Width = max(o.Width, 100)
	if !(o.MinFrac > 0) {
		o.MinFrac = DefaultMinFrac
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	root := buildTree(p, o.MaxDepth)
	top := float64(pad)
	if o.Title != "" {
		top = titleHeight
	}
	c := &chart{
		top:       top,
		scale:     float64(o.Width-2*pad) / math.Max(float64(root.value), 1),
		minValue:  o.MinFrac * float64(root.value),
		maxDepth:  o.MaxDepth,
		total:     root.value,
		highlight: make(map[string]bool, len(o.Highlight)),
	}
	for _, h := range o.Highlight {
		c.highlight[h] = true
	}
	if root.value > 0 {
		c.draw(root, pad, 0)
	}
	rows := c.rows
	if root.value == 0 {
		rows = 1
	}
	height := int(top) + rows*rowHeight + pad

	var out bytes.Buffer
	fmt.Fprintf(&out, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="11">`+"\n",
		o.Width, height, o.Width, height)
	out.WriteString(`<rect width="100%" height="100%" fill="#f8f8f8"/>` + "\n")
	if o.Title != "" {
		fmt.Fprintf(&out, `<text x="%d" y="18" font-size="15" text-anchor="middle">`, o.Width/2)
		out.WriteString(escape(clean(o.Title)))
		out.WriteString("</text>\n")
	}
	if root.value == 0 {
		fmt.Fprintf(&out, `<text x="%d" y="%s">no samples</text>`+"\n", pad, num(top+textBase))
	}
	out.Write(c.body.Bytes())
	out.WriteString("</svg>\n")
	if _, err := w.Write(out.Bytes()); err != nil {
		return fmt.Errorf("profile: writing icicle chart: %w", err)
	}
	return nil
}

// buildTree returns the tree of the stacks of p, at most maxDepth frames
// below the root "all". Empty names are skipped.
func buildTree(p *Profile, maxDepth int) *node {
	root := &node{name: "all"}
	if p == nil {
		return root
	}
	for stack, n := range p.Stacks {
		if n <= 0 {
			continue
		}
		root.value = addSat(root.value, n)
		cur := root
		depth := 0
		for rest, more := stack, true; more && depth < maxDepth; {
			var name string
			name, rest, more = strings.Cut(rest, ";")
			if name == "" {
				continue
			}
			cur = cur.child(name)
			cur.value = addSat(cur.value, n)
			depth++
		}
	}
	return root
}

// chart lays out and draws the frames of an icicle chart.
type chart struct {
	body      bytes.Buffer
	top       float64 // y of the root row
	scale     float64 // pixels per sample
	minValue  float64 // samples under which frames are left out
	maxDepth  int
	total     int64
	highlight map[string]bool
	rows      int // rows drawn so far
	scratch   []byte
}

// draw draws n at x (in pixels) and row depth, then its callees.
func (c *chart) draw(n *node, x float64, depth int) {
	c.rect(n, x, depth)
	c.rows = max(c.rows, depth+1)
	if depth >= c.maxDepth || len(n.children) == 0 {
		return
	}
	kids := make([]*node, 0, len(n.children))
	for _, k := range n.children {
		kids = append(kids, k)
	}
	slices.SortFunc(kids, func(a, b *node) int { return strings.Compare(a.name, b.name) })
	var before int64 // samples of the callees left of the current one
	for _, k := range kids {
		if float64(k.value) >= c.minValue {
			c.draw(k, x+float64(before)*c.scale, depth+1)
		}
		before += k.value
	}
}

// rect draws one frame: a rectangle with a tooltip and a label.
func (c *chart) rect(n *node, x float64, depth int) {
	width := float64(n.value) * c.scale
	y := c.top + float64(depth*rowHeight)
	name := clean(n.name)
	b := c.scratch[:0]
	b = append(b, "<g><title>"...)
	b = append(b, escape(name)...)
	b = append(b, ": "...)
	b = strconv.AppendInt(b, n.value, 10)
	b = append(b, " samples ("...)
	b = strconv.AppendFloat(b, 100*float64(n.value)/float64(c.total), 'f', 1, 64)
	b = append(b, "%)</title><rect x=\""...)
	b = append(b, num(x)...)
	b = append(b, "\" y=\""...)
	b = append(b, num(y)...)
	b = append(b, "\" width=\""...)
	b = append(b, num(width)...)
	b = append(b, "\" height=\""...)
	b = strconv.AppendInt(b, frameHeight, 10)
	b = append(b, "\" fill=\""...)
	b = append(b, c.colour(n.name, depth)...)
	b = append(b, "\"/>"...)
	if l := label(name, width); l != "" {
		b = append(b, "<text x=\""...)
		b = append(b, num(x+textInset)...)
		b = append(b, "\" y=\""...)
		b = append(b, num(y+textBase)...)
		b = append(b, "\">"...)
		b = append(b, escape(l)...)
		b = append(b, "</text>"...)
	}
	b = append(b, "</g>\n"...)
	c.body.Write(b)
	c.scratch = b
}

// colour returns the fill colour of a frame: grey for the root, blue for
// highlighted functions, and otherwise a warm hue derived from the name.
func (c *chart) colour(name string, depth int) string {
	if depth == 0 {
		return "#c8c8c8"
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	sum := h.Sum32()
	v1 := float64(sum&0xff) / 255
	v2 := float64(sum>>8&0xff) / 255
	v3 := float64(sum>>16&0xff) / 255
	var r, g, b float64
	if c.highlight[name] {
		r, g, b = 40+50*v1, 110+70*v2, 215+40*v3
	} else {
		r, g, b = 205+50*v3, 230*v1, 55*v2
	}
	return fmt.Sprintf("#%02x%02x%02x", int(r), int(g), int(b))
}

// label returns the part of name that fits in a frame of the width in
// pixels, ending in ".." when cut, or "" when fewer than three characters
// fit.
func label(name string, width float64) string {
	fit := int((width - textInset) / charWidth)
	if fit < minChars {
		return ""
	}
	if utf8.RuneCountInString(name) <= fit {
		return name
	}
	i, n := 0, 0
	for i < len(name) && n < fit-2 {
		_, size := utf8.DecodeRuneInString(name[i:])
		i += size
		n++
	}
	return name[:i] + ".."
}

// num formats a coordinate rounded to one decimal.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

// clean returns s without control characters and characters XML does not
// allow, and with invalid UTF-8 replaced by U+FFFD.
func clean(s string) string {
	ok := utf8.ValidString(s)
	for _, r := range s {
		if !xmlChar(r) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case xmlChar(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// xmlChar reports whether r is allowed in XML text and is not a control
// character. Invalid UTF-8 decodes to U+FFFD, which is allowed, and is
// replaced by clean.
func xmlChar(r rune) bool {
	if unicode.IsControl(r) {
		return false
	}
	return r >= 0x20 && r <= 0xd7ff || r >= 0xe000 && r <= 0xfffd || r >= 0x10000 && r <= 0x10ffff
}

// escape returns s with the characters that are special in XML text and
// attributes escaped.
func escape(s string) string {
	if !strings.ContainsAny(s, `<>&"'`) {
		return s
	}
	return xmlEscaper.Replace(s)
}

// xmlEscaper escapes the characters that are special in XML.
var xmlEscaper = strings.NewReplacer(
	"<", "&lt;",
	">", "&gt;",
	"&", "&amp;",
	`"`, "&#34;",
	"'", "&#39;",
)
