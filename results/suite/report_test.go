package suite

import (
	"bytes"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the reports")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the report:\n%s", p, got)
	}
}

// extension is each format's golden file extension.
var extension = map[string]string{"text": "txt", "md": "md", "json": "json", "junit": "xml", "html": "html"}

func TestReports(t *testing.T) {
	a, b := ab()
	b.Splats = []SplatRef{{"warning", "WARNING in kernel_init"}}
	for _, s := range []struct {
		r      *Run
		status string
	}{{a, "pass"}, {a, "pass"}, {b, "fail"}, {b, "fail"}} {
		s.r.AddRerun(Test{Name: "generic/013", Status: s.status})
	}
	v := Compare(a, b)
	for _, f := range Formats {
		var rb, vb bytes.Buffer
		if err := WriteRun(&rb, b, f); err != nil {
			t.Fatal(err)
		}
		golden(t, "run."+extension[f]+".golden", rb.Bytes())
		if err := WriteVerdict(&vb, v, f); err != nil {
			t.Fatal(err)
		}
		golden(t, "verdict."+extension[f]+".golden", vb.Bytes())
		if f == "junit" {
			for _, doc := range [][]byte{rb.Bytes(), vb.Bytes()} {
				if err := xml.Unmarshal(doc, new(struct{})); err != nil {
					t.Errorf("junit does not parse: %v", err)
				}
			}
		}
		if f == "html" && strings.Contains(vb.String(), "<EIO>") {
			t.Error("html report holds an unescaped diff")
		}
	}
	if err := WriteRun(&bytes.Buffer{}, b, "pdf"); err == nil || !strings.Contains(err.Error(), "want one of text, md, json, junit, html") {
		t.Errorf("unknown format: %v", err)
	}
}
