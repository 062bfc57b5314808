package report

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"klab/internal/testenv"
)

func TestHTML(t *testing.T) {
	r := testReport(t)
	page := renderAs(t, "html", r)
	if !strings.HasPrefix(page, "<!DOCTYPE html>\n<html") || !strings.HasSuffix(page, "</html>\n") {
		t.Errorf("not an HTML document:\n%.200s\n...\n%s", page, page[max(0, len(page)-200):])
	}
	checkTags(t, page)
	if n := strings.Count(page, "<svg"); n != len(r.Rows) {
		t.Errorf("%d <svg> elements, want one per row (%d)", n, len(r.Rows))
	}
	for i, svg := range strings.Split(page, "<svg")[1:] {
		svg, _, _ = strings.Cut(svg, "</svg>")
		if strings.Count(svg, "<path") < 10 || !strings.Contains(svg, "<text") {
			t.Errorf("chart %d has no drawing:\n%s", i, svg)
		}
	}
	checkSafe(t, page)
	for _, w := range []string{
		"<title>klab: fuse-uring: FUSE over io_uring against /dev/fuse</title>",
		"A: debian:7.3 (debian-7.3 6.12.43&#43;deb13 3f2a9c1b)   B: build:fix (fix 6.12.43-g1a2b3c4 9b8c7d6e)",
		"id 3f2a9c1b7e0d5a4c8b6e2f1d0c9b8a7f6e5d4c3b",
		"experiments/fuse-uring.toml, sha256 5d41402abc4b2a76b9719d911017c592ae4c0e7d5d41402abc4b2a76b9719d91",
		"QEMU emulator version 7.2.17 (Debian 1:7.2&#43;dfsg-7&#43;deb12u16)",
		"/var/lib/klab/runs/20260301-101500-fuse-uring",
		"wall 27m13s",
		"5 (abba, fresh)",
		`<td>randread bs=4k</td><td class="right">12.3k ops/s</td><td class="right">13.8k ops/s</td><td class="right">1.12x</td><td class="right">&#43;12.2%</td><td>[&#43;9.7% &#43;15%]</td><td>p=0.008</td><td class="right">5</td><td class="right">1.7%</td><td>better</td>`,
		"seqwrite bs=1M: n.s.: cannot be significant with n=3 per side",
		`<li class="fail">FAIL fsx [transport=uring on build:fix] B round 2: READ BAD DATA`,
		"skipped: transport=uring jobs=8 on debian:7.3: needs fuse-io-uring",
		"warning: need &gt;= 6 samples for confidence interval at level 0.95 (seqwrite bs=1M)",
		"<pre>Table 2 of the series&#39; cover letter:\n\tjob\tdev\turing\n",
		`<p class="result fail">result: FAIL: check fsx failed`,
	} {
		if !strings.Contains(page, w) {
			t.Errorf("no %q", w)
		}
	}
}

// checkSafe checks that page runs nothing, loads nothing and shows the
// guest's text as text.
func checkSafe(t *testing.T, page string) {
	t.Helper()
	if regexp.MustCompile(`(?i)<script`).MatchString(page) {
		t.Errorf("a <script> element")
	}
	if m := regexp.MustCompile(`(?i)\b(src|href|action|poster|srcset)\s*=\s*["']?\s*(https?:)?//`).FindString(page); m != "" {
		t.Errorf("an external reference: %s", m)
	}
	if m := regexp.MustCompile(`(?i)url\(|@import|<link|<iframe|<object|<embed|<img`).FindString(page); m != "" {
		t.Errorf("something that loads: %s", m)
	}
	if !strings.Contains(page, "fuse_uring_cmd[31m&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("the guest's splat title is not shown escaped")
	}
	if strings.ContainsAny(page, "\x1b\x00") {
		t.Errorf("a control character got through")
	}
}

// tagRE matches an HTML or SVG start, end or self-closing tag.
var tagRE = regexp.MustCompile(`<(/?)([a-zA-Z][a-zA-Z0-9:-]*)(?:\s[^<>]*?)?(/?)>`)

// voidElements have no end tag.
var voidElements = map[string]bool{"meta": true, "br": true, "link": true, "img": true, "hr": true, "input": true, "col": true, "wbr": true}

// checkTags checks that page's tags nest and that every '<' starts one.
func checkTags(t *testing.T, page string) {
	t.Helper()
	body := strings.TrimPrefix(page, "<!DOCTYPE html>")
	var stack []string
	for _, m := range tagRE.FindAllStringSubmatch(body, -1) {
		closing, name, selfClosing := m[1] == "/", strings.ToLower(m[2]), m[3] == "/"
		switch {
		case selfClosing || (!closing && voidElements[name]):
		case !closing:
			stack = append(stack, name)
		case len(stack) == 0 || stack[len(stack)-1] != name:
			t.Fatalf("</%s> closes %v", name, stack)
		default:
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Errorf("unclosed %v", stack)
	}
	if rest := tagRE.ReplaceAllString(body, ""); strings.Contains(rest, "<") {
		i := strings.Index(rest, "<")
		t.Errorf("a '<' outside a tag: %q", rest[max(0, i-40):min(len(rest), i+40)])
	}
}

// chromium returns the path of the chromium binary, skipping the test
// when there is none (failing it in CI, where make deps installs it).
func chromium(t *testing.T) string {
	t.Helper()
	testenv.RequiresCommand(t, "chromium")
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runChromium runs headless Chromium with args (the URL last) and a
// private profile in dir, and returns its standard output.
func runChromium(t *testing.T, bin, dir string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	what := strings.Join(args[:len(args)-1], " ")
	args = append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + filepath.Join(dir, "profile"),
	}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	// Chromium starts helper processes: run it in a process group of
	// its own and end the whole group, on timeout and after it exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = ctx.Err()
		}
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("chromium %s: %v", what, time.Since(start).Round(time.Millisecond))
	return stdout.Bytes()
}

func TestHTMLInChromium(t *testing.T) {
	bin := chromium(t)
	r := testReport(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	if err := os.WriteFile(path, []byte(renderAs(t, "html", r)), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "file://" + path

	shot := filepath.Join(dir, "shot.png")
	runChromium(t, bin, dir, "--screenshot="+shot, "--window-size=1200,2000", url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decoding the screenshot: %v", err)
	}
	checkScreenshot(t, img)

	dom := string(runChromium(t, bin, dir, "--dump-dom", url))
	if n := strings.Count(dom, "<svg"); n != len(r.Rows) {
		t.Errorf("the DOM has %d <svg> elements, want %d", n, len(r.Rows))
	}
	for i, svg := range strings.Split(dom, "<svg")[1:] {
		svg, _, _ = strings.Cut(svg, "</svg>")
		if !strings.Contains(svg, "<path") && !strings.Contains(svg, "<circle") {
			t.Errorf("chart %d has no shapes in the DOM", i)
		}
	}
	if strings.Contains(dom, "<img") || strings.Contains(dom, "<script") {
		t.Errorf("the guest's text made elements in the DOM")
	}
	if !strings.Contains(dom, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("the DOM does not show the guest's text")
	}
}

// checkScreenshot checks that the page is not blank and that the charts
// were drawn: some pixels have A's and B's colours, which only the charts
// use.
func checkScreenshot(t *testing.T, img image.Image) {
	t.Helper()
	b := img.Bounds()
	inked := 0
	var sides [2]int
	var chartBox image.Rectangle
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			if r < 0xf0 || g < 0xf0 || bl < 0xf0 {
				inked++
			}
			for i, c := range sideColors {
				if near(r, c.R) && near(g, c.G) && near(bl, c.B) {
					sides[i]++
					chartBox = chartBox.Union(image.Rect(x, y, x+1, y+1))
				}
			}
		}
	}
	total := b.Dx() * b.Dy()
	t.Logf("screenshot %v: %d of %d pixels inked, %v in the sides' colours within %v", b.Size(), inked, total, sides, chartBox)
	if inked < total/100 {
		t.Errorf("the page looks blank: %d of %d pixels not white", inked, total)
	}
	for i, n := range sides {
		if n < 50 {
			t.Errorf("side %c's colour covers %d pixels: the charts were not drawn", 'A'+i, n)
		}
	}
	if chartBox.Dx() < 200 || chartBox.Dy() < 50 {
		t.Errorf("the charts' marks span only %v", chartBox)
	}
}

// near reports whether the 8-bit colour components v and c are close.
func near(v uint32, c uint8) bool {
	d := int(v) - int(c)
	return d > -24 && d < 24
}
