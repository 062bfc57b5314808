package render

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
)

// HTMLItem is one line of a list on an HTML page; Bad marks a failure.
// Detail, when a page shows it, is preformatted text under the line (a
// failed check's output).
type HTMLItem struct {
	Text   string
	Bad    bool
	Detail string
}

// htmlSections are the sections both report pages show, as
// html/template definitions (see HTMLTemplate).
const htmlSections = `
{{define "head"}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>klab: {{.Title}}</title>{{end}}
{{define "result"}}<p class="result {{if .Passed}}pass{{else}}fail{{end}}">{{.Result}}</p>{{end}}
{{define "skipped"}}{{with .}}

<h2>Skipped cells</h2>
<ul>
{{- range .}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}{{end}}
{{define "splats"}}<h2>Kernel splats</h2>
{{- if .}}
<ul>
{{- range .}}
<li{{if .Bad}} class="fail"{{end}}>{{.Text}}</li>
{{- end}}
</ul>
{{- else}}
<p>no kernel splats</p>
{{- end}}{{end}}
{{define "warnings"}}{{with .}}

<h2>Warnings</h2>
<ul>
{{- range .}}
<li>warning: {{.}}</li>
{{- end}}
</ul>
{{- end}}{{end}}
`

// HTMLTemplate parses page, an html/template page named name, together
// with the sections both report pages show, which page includes with
// {{template "section" value}}:
//
//   - "head": the page's start, from <!DOCTYPE html> to the <title>,
//     "klab: " and the Title field of its value; the <head> is left
//     open for the page's style;
//   - "result": the result paragraph, class "result pass" or "result
//     fail", of a value with the fields Passed (bool) and Result;
//   - "skipped": a blank line, then the "Skipped cells" heading and a
//     list of a []string; nothing when it is empty;
//   - "splats": the "Kernel splats" heading and a list of a []HTMLItem,
//     the Bad ones of class "fail", or "no kernel splats";
//   - "warnings": a blank line, then the "Warnings" heading and a list of
//     a []string, each item starting "warning: "; nothing when it is
//     empty.
//
// It panics when either does not parse.
func HTMLTemplate(name, page string) *template.Template {
	return template.Must(template.Must(template.New(name).Parse(page)).Parse(htmlSections))
}

// WriteHTML executes t with data and writes the result to w, writing
// nothing when executing fails. what names the page in errors ("html
// report": "rendering html report: ...", "writing html report: ...").
func WriteHTML(w io.Writer, t *template.Template, data any, what string) error {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return fmt.Errorf("rendering %s: %w", what, err)
	}
	if _, err := b.WriteTo(w); err != nil {
		return fmt.Errorf("writing %s: %w", what, err)
	}
	return nil
}
