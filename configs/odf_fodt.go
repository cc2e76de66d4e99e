// The fodt template function: a flat OpenDocument text document, one
// paragraph a line, with headings and bold and italic spans.

package configs

import (
	"fmt"
	"strings"
)

// fodtDoc is the fodt template function.
func fodtDoc(args ...any) (string, error) {
	var lines []string
	for _, a := range args {
		switch a.(type) {
		case string, []string, []any, []int64:
		default:
			return "", fmt.Errorf("fodt: %T is not text or a list of paragraphs", a)
		}
		lines = append(lines, docLines(a)...)
	}
	if len(lines) > maxODFCells {
		return "", fmt.Errorf("fodt: %d paragraphs; at most %d", len(lines), maxODFCells)
	}
	var body strings.Builder
	for i, l := range lines {
		level := 0
		for _, h := range []string{"# ", "## ", "### "} {
			if strings.HasPrefix(l, h) {
				level = len(h) - 1
			}
		}
		if level > 0 {
			l = strings.TrimLeft(l[level+1:], " ")
		}
		spans, err := inlineSpans(l)
		if err != nil {
			return "", fmt.Errorf("fodt: paragraph %d: %w", i+1, err)
		}
		if level > 0 {
			fmt.Fprintf(&body, "<text:h text:style-name=\"Heading_20_%d\" text:outline-level=\"%d\">%s</text:h>\n", level, level, spans)
		} else {
			fmt.Fprintf(&body, "<text:p text:style-name=\"Standard\">%s</text:p>\n", spans)
		}
	}
	var out strings.Builder
	out.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	out.WriteString(`<office:document ` + odfNamespaces + ` office:mimetype="application/vnd.oasis.opendocument.text">` + "\n")
	out.WriteString(fodtStyles)
	out.WriteString("<office:body>\n<office:text>\n")
	out.WriteString(body.String())
	out.WriteString("</office:text>\n</office:body>\n</office:document>\n")
	return out.String(), nil
}

// fodtStyles are a text document's styles: LibreOffice's own Standard,
// Heading and Heading 1 to 3 (bold, larger, outline levels 1 to 3), and
// the automatic styles of bold and italic spans.
const fodtStyles = `<office:styles>
<style:style style:name="Standard" style:family="paragraph" style:class="text"/>
<style:style style:name="Heading" style:family="paragraph" style:parent-style-name="Standard" style:next-style-name="Text_20_body" style:class="text"><style:paragraph-properties fo:margin-top="0.423cm" fo:margin-bottom="0.212cm" fo:keep-with-next="always"/><style:text-properties fo:font-size="14pt"/></style:style>
<style:style style:name="Text_20_body" style:display-name="Text body" style:family="paragraph" style:parent-style-name="Standard" style:class="text"><style:paragraph-properties fo:margin-top="0cm" fo:margin-bottom="0.247cm" fo:line-height="115%"/></style:style>
<style:style style:name="Heading_20_1" style:display-name="Heading 1" style:family="paragraph" style:parent-style-name="Heading" style:next-style-name="Text_20_body" style:default-outline-level="1" style:class="text"><style:paragraph-properties fo:margin-top="0.423cm" fo:margin-bottom="0.212cm"/><style:text-properties fo:font-size="130%" fo:font-weight="bold" style:font-weight-asian="bold" style:font-weight-complex="bold"/></style:style>
<style:style style:name="Heading_20_2" style:display-name="Heading 2" style:family="paragraph" style:parent-style-name="Heading" style:next-style-name="Text_20_body" style:default-outline-level="2" style:class="text"><style:paragraph-properties fo:margin-top="0.353cm" fo:margin-bottom="0.212cm"/><style:text-properties fo:font-size="115%" fo:font-weight="bold" style:font-weight-asian="bold" style:font-weight-complex="bold"/></style:style>
<style:style style:name="Heading_20_3" style:display-name="Heading 3" style:family="paragraph" style:parent-style-name="Heading" style:next-style-name="Text_20_body" style:default-outline-level="3" style:class="text"><style:paragraph-properties fo:margin-top="0.247cm" fo:margin-bottom="0.212cm"/><style:text-properties fo:font-size="101%" fo:font-weight="bold" style:font-weight-asian="bold" style:font-weight-complex="bold"/></style:style>
<text:outline-style style:name="Outline"><text:outline-level-style text:level="1" style:num-format=""/><text:outline-level-style text:level="2" style:num-format=""/><text:outline-level-style text:level="3" style:num-format=""/></text:outline-style>
</office:styles>
<office:automatic-styles>
<style:style style:name="T1" style:family="text"><style:text-properties fo:font-weight="bold" style:font-weight-asian="bold" style:font-weight-complex="bold"/></style:style>
<style:style style:name="T2" style:family="text"><style:text-properties fo:font-style="italic" style:font-style-asian="italic" style:font-style-complex="italic"/></style:style>
</office:automatic-styles>
`

// inlineSpans writes a paragraph's text with **bold** (style T1) and
// *italic* (T2) spans, not nested; a marker without its pair is text.
func inlineSpans(l string) (string, error) {
	w := newODFText(false)
	plain := 0 // l[plain:i] is text not yet written
	span := func(i, j, k int, style string) {
		w.text(l[plain:i])
		w.raw(`<text:span text:style-name="` + style + `">`)
		w.text(l[j:k])
		w.raw(`</text:span>`)
	}
	for i := 0; i < len(l); {
		if strings.HasPrefix(l[i:], "**") {
			if k := strings.Index(l[i+2:], "**"); k > 0 {
				span(i, i+2, i+2+k, "T1")
				i += 2 + k + 2
				plain = i
			} else {
				i += 2
			}
			continue
		}
		if l[i] == '*' {
			if k := strings.IndexByte(l[i+1:], '*'); k > 0 && !strings.HasPrefix(l[i+1+k:], "**") {
				span(i, i+1, i+1+k, "T2")
				i += 1 + k + 1
				plain = i
				continue
			}
		}
		i++
	}
	w.text(l[plain:])
	return w.finish()
}
