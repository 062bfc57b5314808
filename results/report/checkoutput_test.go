package report

import (
	"encoding/xml"
	"strings"
	"testing"
)

// checkOutputReport has a failed check whose output is hostile (terminal
// escapes, HTML, Markdown, a tab, XML's CDATA end) and a passed check
// whose output is never shown.
func checkOutputReport() *Report {
	return &Report{
		Experiment: "checks", Rounds: 1, A: Side{Label: "dev"}, B: Side{Label: "uring"},
		Checks: []Check{
			{Name: "ok", Cell: "dev", Side: "a", Round: 1, Passed: true, Output: "all fine\n"},
			{Name: "teardown", Cell: "uring", Side: "b", Round: 1, Message: "exit 2, want 0",
				Output: "umount: /mnt/fuse: target is busy\n\x1b[31mleft:\t3 requests\x1b[0m\n<img src=x onerror=alert(1)> ]]> `x` | *y*\n"},
		},
		Failures: []string{"check teardown failed on uring round 1: exit 2, want 0"},
	}
}

// TestCheckOutput: a failed check's line is followed by the tail of its
// output in every format, cleaned of control characters and escaped; a
// passed check's output is not shown.
func TestCheckOutput(t *testing.T) {
	r := checkOutputReport()
	text := renderAs(t, "text", r)
	t.Logf("\n%s", text)
	checkText(t, text)
	want := strings.Join([]string{
		"FAIL teardown [uring] B round 1: exit 2, want 0",
		"    | umount: /mnt/fuse: target is busy",
		"    | [31mleft:       3 requests[0m",
		"    | <img src=x onerror=alert(1)> ]]> `x` | *y*",
	}, "\n")
	if !strings.Contains(text, want) {
		t.Errorf("text: no\n%s", want)
	}
	if strings.Contains(text, "all fine") {
		t.Errorf("text: a passed check's output is shown")
	}

	md := renderAs(t, "md", r)
	t.Logf("\n%s", md)
	want = "\nOutput of FAIL teardown [uring] B round 1: exit 2, want 0 (its last lines):\n\n" +
		"    umount: /mnt/fuse: target is busy\n" +
		"    [31mleft:       3 requests[0m\n" +
		"    <img src=x onerror=alert(1)> ]]> `x` | *y*\n"
	if !strings.Contains(md, want) {
		t.Errorf("md: no\n%s", want)
	}
	if strings.Contains(md, "all fine") || strings.Contains(md, "\x1b") {
		t.Errorf("md: a passed check's output, or an escape character")
	}

	page := renderAs(t, "html", r)
	checkTags(t, page)
	want = `<li class="fail">FAIL teardown [uring] B round 1: exit 2, want 0<pre>umount: /mnt/fuse: target is busy` + "\n" +
		`[31mleft:       3 requests[0m` + "\n" + `&lt;img src=x onerror=alert(1)&gt; ]]&gt; ` + "`x` | *y*</pre></li>"
	if !strings.Contains(page, want) {
		t.Errorf("html: no\n%s", want)
	}
	if strings.Contains(page, "all fine") || strings.ContainsAny(page, "\x1b") {
		t.Errorf("html: a passed check's output, or an escape character")
	}

	var doc struct {
		Suites []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	junit := renderAs(t, "junit", r)
	if err := xml.Unmarshal([]byte(junit), &doc); err != nil {
		t.Fatalf("junit: %v\n%s", err, junit)
	}
	var found bool
	for _, c := range doc.Suites[0].Cases {
		if c.Failure == nil || !strings.HasPrefix(c.Name, "teardown") {
			continue
		}
		found = true
		if c.Failure.Message != "exit 2, want 0" || !strings.HasPrefix(c.Failure.Text, "umount: /mnt/fuse: target is busy\n[31mleft:") ||
			!strings.HasSuffix(c.Failure.Text, "]]> `x` | *y*") {
			t.Errorf("junit failure %+v", c.Failure)
		}
	}
	if !found || strings.Contains(junit, "all fine") {
		t.Errorf("junit: the failed check found %v; or a passed check's output shown:\n%s", found, junit)
	}
}
