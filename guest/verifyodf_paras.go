// The verifier's paras op: a text document's paragraphs, read from its
// body and written out with their heading levels, styles and fonts.

package guest

import (
	"encoding/xml"
	"strings"
)

// Text documents.

type odfPara struct {
	heading bool
	level   string
	style   string
	list    bool
	table   bool
	runs    []*odfRun
	text    string
}

// readText reads office:text: every text:p and text:h, inside lists,
// sections and tables too; notes, comments, frames and tracked deletions
// are not the document's text.
func (doc *odfDoc) readText(p *odfParser) error {
	var list, table int
	var visit func(se *xml.StartElement, _ xml.CharData) error
	visit = func(se *xml.StartElement, _ xml.CharData) error {
		switch {
		case se == nil:
			return nil
		case skippedInline(se.Name), isElem(se.Name, nsOffice, "forms"):
			return p.skip()
		case isElem(se.Name, nsText, "p"), isElem(se.Name, nsText, "h"):
			para := &odfPara{
				heading: se.Name.Local == "h",
				style:   attr(se, nsText, "style-name"),
				list:    list > 0,
				table:   table > 0,
			}
			if para.heading {
				para.level = attr(se, nsText, "outline-level")
				if para.level == "" {
					para.level = "1"
				}
			}
			t := &textReader{p: p}
			if err := t.paragraph(); err != nil {
				return err
			}
			para.runs, para.text = t.runs, t.text()
			doc.paras = append(doc.paras, para)
			return nil
		case isElem(se.Name, nsText, "list-item"), isElem(se.Name, nsText, "list-header"):
			list++
			defer func() { list-- }()
		case isElem(se.Name, nsTable, "table-cell"), isElem(se.Name, nsTable, "covered-table-cell"):
			table++
			defer func() { table-- }()
		}
		return p.within(visit)
	}
	return p.within(visit)
}

func (doc *odfDoc) writeParas(out *docOutput) error {
	if doc.body != "text" {
		return failf(CheckMismatch, "a %s document, not a text document", doc.body)
	}
	for _, para := range doc.paras {
		kind, second := "p", doc.paraStyleName(para.style)
		if para.heading {
			kind, second = "h", para.level
		}
		if err := out.line(kind, escapeField(second), escapeField(doc.paraProps(para)), escapeField(para.text)); err != nil {
			return err
		}
	}
	return nil
}

// paraStyleName is the name a paragraph style is shown by: an automatic
// style's parent's, its display name where it has one.
func (doc *odfDoc) paraStyleName(name string) string {
	s := &doc.styles
	if st := s.auto[styleKey("paragraph", name)]; st != nil {
		if st.parent == "" {
			return "Standard"
		}
		name = st.parent
	}
	if name == "" {
		return "Standard"
	}
	if st := s.common[styleKey("paragraph", name)]; st != nil && st.display != "" {
		return st.display
	}
	return name
}

// paraProps: bold, italic, underline where all the paragraph's visible
// text is so; its alignment; list, table.
func (doc *odfDoc) paraProps(para *odfPara) string {
	s := &doc.styles
	ps := s.resolve("paragraph", para.style)
	if ps == nil {
		ps = &odfStyle{}
		if d := s.defaults["paragraph"]; d != nil {
			ps.inherit(d)
		}
	}
	props := s.fontOf(para.runs, ps)
	switch ps.align {
	case "", "start", "left":
	default:
		props = append(props, "align="+ps.align)
	}
	if para.list {
		props = append(props, "list")
	}
	if para.table {
		props = append(props, "table")
	}
	return strings.Join(props, ",")
}
