// The verifier's reading of an OpenDocument file's styles (the cell,
// paragraph, text and number styles a document's fonts and formats come
// from) and of its text runs, shared by the cells and paras ops.

package guest

import (
	"encoding/xml"
	"strconv"
	"strings"
)

// Styles.

// tri is an unset, false or true property.
type tri uint8

const (
	triUnset tri = iota
	triNo
	triYes
)

// odfStyle is a style's properties that the ops report.
type odfStyle struct {
	parent, data, display string
	bold, italic, under   tri
	align                 string
	// numFormat is a data style's props (number styles only).
	numFormat string
}

// odfStyles are a document's styles by family and name: automatic ones
// (content.xml's), common ones (office:styles), a family's default style;
// data (number) styles as family "data".
type odfStyles struct {
	auto, common, defaults map[string]*odfStyle
	resolved               map[string]*odfStyle
}

func styleKey(family, name string) string { return family + "\x00" + name }

// read reads one element of office:styles or office:automatic-styles.
func (s *odfStyles) read(p *odfParser, se *xml.StartElement, auto bool) error {
	set := s.common
	if auto {
		set = s.auto
	}
	switch {
	case isElem(se.Name, nsStyle, "style"), isElem(se.Name, nsStyle, "default-style"):
		st := &odfStyle{
			parent:  attr(se, nsStyle, "parent-style-name"),
			data:    attr(se, nsStyle, "data-style-name"),
			display: attr(se, nsStyle, "display-name"),
		}
		family := attr(se, nsStyle, "family")
		err := p.within(func(c *xml.StartElement, _ xml.CharData) error {
			if c == nil {
				return nil
			}
			switch {
			case isElem(c.Name, nsStyle, "text-properties"):
				st.bold = weight(attr(c, nsFO, "font-weight"))
				st.italic = slant(attr(c, nsFO, "font-style"))
				st.under = underline(attr(c, nsStyle, "text-underline-style"))
			case isElem(c.Name, nsStyle, "paragraph-properties"):
				st.align = attr(c, nsFO, "text-align")
			}
			return p.skip()
		})
		if err != nil {
			return err
		}
		if isElem(se.Name, nsStyle, "default-style") {
			s.defaults[family] = st
		} else {
			set[styleKey(family, attr(se, nsStyle, "name"))] = st
		}
		return nil
	case se.Name.Space == nsNumber && strings.HasSuffix(se.Name.Local, "-style"):
		props, err := readDataStyle(p, se)
		if err != nil {
			return err
		}
		set[styleKey("data", attr(se, nsStyle, "name"))] = &odfStyle{numFormat: props}
		return nil
	}
	return p.skip()
}

func weight(v string) tri {
	switch v {
	case "":
		return triUnset
	case "bold":
		return triYes
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 600 {
		return triYes
	}
	return triNo
}

func slant(v string) tri {
	switch v {
	case "":
		return triUnset
	case "italic", "oblique":
		return triYes
	}
	return triNo
}

func underline(v string) tri {
	switch v {
	case "":
		return triUnset
	case "none":
		return triNo
	}
	return triYes
}

// readDataStyle is a number style's props: its kind, then decimals=N and
// grouping where its number says so.
func readDataStyle(p *odfParser, se *xml.StartElement) (string, error) {
	kind := map[string]string{
		"number-style": "number", "currency-style": "currency", "percentage-style": "percent",
		"date-style": "date", "time-style": "time", "boolean-style": "boolean", "text-style": "text",
	}[se.Name.Local]
	var decimals, grouping, symbol string
	err := p.within(func(c *xml.StartElement, _ xml.CharData) error {
		if c == nil {
			return nil
		}
		switch {
		case isElem(c.Name, nsNumber, "number"), isElem(c.Name, nsNumber, "scientific-number"), isElem(c.Name, nsNumber, "fraction"):
			if c.Name.Local != "number" && kind == "number" {
				kind = c.Name.Local
				if kind == "scientific-number" {
					kind = "scientific"
				}
			}
			decimals = attr(c, nsNumber, "decimal-places")
			if attr(c, nsNumber, "grouping") == "true" {
				grouping = "grouping"
			}
		case isElem(c.Name, nsNumber, "currency-symbol"):
			var b strings.Builder
			err := p.within(func(_ *xml.StartElement, cd xml.CharData) error {
				if cd == nil {
					return p.skip()
				}
				if b.Len() < 64 {
					b.Write(cd)
				}
				return nil
			})
			symbol = strings.TrimSpace(b.String())
			return err
		}
		return p.skip()
	})
	if err != nil {
		return "", err
	}
	if kind == "" {
		return "", nil
	}
	props := []string{kind}
	if kind == "currency" && symbol != "" {
		props[0] = "currency=" + symbol
	}
	if decimals != "" {
		if _, err := strconv.Atoi(decimals); err == nil {
			props = append(props, "decimals="+decimals)
		}
	}
	if grouping != "" {
		props = append(props, grouping)
	}
	return strings.Join(props, ","), nil
}

// lookup finds a style: an automatic one first, then a common one.
func (s *odfStyles) lookup(family, name string, autoFirst bool) *odfStyle {
	k := styleKey(family, name)
	if autoFirst {
		if st := s.auto[k]; st != nil {
			return st
		}
	}
	return s.common[k]
}

// resolve is a style with every property it leaves unset taken from its
// parents, then from its family's default style; nil for no such style.
func (s *odfStyles) resolve(family, name string) *odfStyle {
	k := styleKey(family, name)
	if st, ok := s.resolved[k]; ok {
		return st
	}
	if s.resolved == nil {
		s.resolved = map[string]*odfStyle{}
	}
	st := s.lookup(family, name, true)
	if st == nil {
		s.resolved[k] = nil
		return nil
	}
	out := *st
	// Parents are common styles; a chain is followed a bounded way (a
	// loop in it ends there).
	for i, cur := 0, st; cur.parent != "" && i < odfMaxChain; i++ {
		cur = s.lookup(family, cur.parent, false)
		if cur == nil {
			break
		}
		out.inherit(cur)
	}
	// A span's unset properties are its paragraph's, not the defaults.
	if d := s.defaults[family]; d != nil && family != "text" {
		out.inherit(d)
	}
	s.resolved[k] = &out
	return &out
}

func (st *odfStyle) inherit(from *odfStyle) {
	if st.data == "" {
		st.data = from.data
	}
	if st.bold == triUnset {
		st.bold = from.bold
	}
	if st.italic == triUnset {
		st.italic = from.italic
	}
	if st.under == triUnset {
		st.under = from.under
	}
	if st.align == "" {
		st.align = from.align
	}
}

// fontOf is bold, italic, underline where all the visible text of runs
// is so: each run through its spans' text styles, innermost first, then
// base (the paragraph's or cell's resolved style); with no visible text,
// base's own.
func (s *odfStyles) fontOf(runs []*odfRun, base *odfStyle) []string {
	all := [3]bool{base.bold == triYes, base.italic == triYes, base.under == triYes}
	seen := false
	for _, r := range runs {
		if strings.TrimSpace(r.text.String()) == "" {
			continue
		}
		if !seen {
			all, seen = [3]bool{true, true, true}, true
		}
		eff := [3]tri{}
		for i := len(r.spans) - 1; i >= -1; i-- {
			st := base
			if i >= 0 {
				if st = s.resolve("text", r.spans[i]); st == nil {
					continue
				}
			}
			for k, v := range [3]tri{st.bold, st.italic, st.under} {
				if eff[k] == triUnset {
					eff[k] = v
				}
			}
		}
		for k := range all {
			all[k] = all[k] && eff[k] == triYes
		}
	}
	var props []string
	for k, name := range []string{"bold", "italic", "underline"} {
		if all[k] {
			props = append(props, name)
		}
	}
	return props
}

// Text.

// odfRun is text under one stack of spans.
type odfRun struct {
	text  strings.Builder
	spans []string // span style names, outermost first
}

// textReader gathers a paragraph's text as LibreOffice reads it: white
// space in the XML collapses to one space and is dropped at the
// paragraph's start; text:s, text:tab and text:line-break are spaces, a
// tab and a newline.
type textReader struct {
	p      *odfParser
	runs   []*odfRun
	spans  []string
	ignore bool // a white-space character here is dropped
}

func (t *textReader) run() *odfRun {
	if n := len(t.runs); n > 0 && slicesEqual(t.runs[n-1].spans, t.spans) {
		return t.runs[n-1]
	}
	r := &odfRun{spans: append([]string(nil), t.spans...)}
	t.runs = append(t.runs, r)
	return r
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (t *textReader) add(s string) error {
	if t.p.text += len(s); t.p.text > CheckMaxDocOutput {
		return failf(CheckTooLarge, "over %d bytes of text", CheckMaxDocOutput)
	}
	t.run().text.WriteString(s)
	return nil
}

// skippedInline are the elements inside a paragraph whose text is not the
// paragraph's: notes, comments, numbering labels; frames and shapes (any
// draw: element) are skipped too.
func skippedInline(n xml.Name) bool {
	switch {
	case n.Space == nsDraw || n.Space == nsDr3d:
		return true
	case isElem(n, nsOffice, "annotation"), isElem(n, nsText, "note"), isElem(n, nsText, "number"), isElem(n, nsText, "tracked-changes"):
		return true
	}
	return false
}

// paragraph reads the rest of the text:p or text:h just started.
func (t *textReader) paragraph() error {
	t.ignore = true
	return t.p.within(t.inline)
}

func (t *textReader) inline(se *xml.StartElement, cd xml.CharData) error {
	if se == nil {
		var b strings.Builder
		for _, r := range string(cd) {
			switch r {
			case ' ', '\t', '\n', '\r':
				if !t.ignore {
					b.WriteByte(' ')
				}
				t.ignore = true
			default:
				b.WriteRune(r)
				t.ignore = false
			}
		}
		return t.add(b.String())
	}
	switch {
	case skippedInline(se.Name):
		return t.p.skip()
	case isElem(se.Name, nsText, "s"):
		n := 1
		if c := attr(se, nsText, "c"); c != "" {
			v, err := strconv.Atoi(c)
			if err != nil || v < 1 {
				v = 1
			}
			if v > CheckMaxDocOutput-t.p.text {
				return failf(CheckTooLarge, "text:s of %s spaces", c)
			}
			n = v
		}
		t.ignore = false
		if err := t.add(strings.Repeat(" ", n)); err != nil {
			return err
		}
		return t.p.skip()
	case isElem(se.Name, nsText, "tab"):
		t.ignore = false
		if err := t.add("\t"); err != nil {
			return err
		}
		return t.p.skip()
	case isElem(se.Name, nsText, "line-break"):
		t.ignore = false
		if err := t.add("\n"); err != nil {
			return err
		}
		return t.p.skip()
	case isElem(se.Name, nsText, "span"):
		t.spans = append(t.spans, attr(se, nsText, "style-name"))
		err := t.p.within(t.inline)
		t.spans = t.spans[:len(t.spans)-1]
		return err
	}
	// Links, fields, bookmarks, ruby and the like: their text is shown.
	return t.p.within(t.inline)
}

func (t *textReader) text() string {
	var b strings.Builder
	for _, r := range t.runs {
		b.WriteString(r.text.String())
	}
	return b.String()
}
