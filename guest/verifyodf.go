package guest

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The verifier library's document ops (docs/architecture.md, "Verifiers
// read the agent's files safely"): what the agent saved from LibreOffice,
// read as OpenDocument, flat (.fods, .fodt: one XML file) or zipped (.ods,
// .odt: content.xml and styles.xml), told apart by content, not by name.
//
//	cells PATH  one line per non-empty cell of every sheet, in sheet order
//	            then row by row:
//	            SHEET TAB REF TAB VALUE TAB FORMULA TAB TYPE TAB PROPS
//	paras PATH  one line per paragraph or heading of a text document:
//	            KIND TAB STYLE-OR-LEVEL TAB PROPS TAB TEXT
//
// cells: REF is A1-style. TYPE is the cell's office:value-type (float,
// percentage, currency, date, time, boolean, string), "error" for a
// formula LibreOffice could not compute, empty for a formula without a
// cached value. VALUE is the typed value, independent of how it is shown:
// a number in shortest plain decimal (strconv 'f', -1: "1234.5", "0.125"
// for 12.5%, never an exponent), a date or time as written
// ("2024-05-01", "PT12H30M00S"), a boolean "true"/"false", a text as its
// paragraphs joined by newlines (office:string-value where a formula's
// result has one), an error as shown ("#DIV/0!"). FORMULA is table:formula
// as written ("of:=SUM([.B2:.B5])"), empty if none. PROPS are the cell's
// formatting, resolved through its style (or, with none, its row's or its
// column's default cell style: LibreOffice keeps a whole column's format
// there) and the style's parents, comma-separated in this order: bold,
// italic, underline (also where spans make all of the cell's text so),
// then its number format (number, currency=SYM, percent, date, time,
// boolean, text, scientific, fraction; then decimals=N, grouping; nothing
// for General), then merge=COLSxROWS for a merged cell.
//
// paras: KIND is h (a heading; STYLE-OR-LEVEL its outline level) or p (a
// paragraph; STYLE-OR-LEVEL its paragraph style's display name, "Standard"
// for the default, "Text body", "Heading 1", ..., an automatic style
// replaced by the style it derives from). PROPS: bold, italic, underline
// when the whole text is so (through its paragraph style and the spans
// within), align=center|end|justify|... when not start-aligned, list
// inside a list, table inside a table. TEXT is the text as shown, with
// text:s, text:tab and text:line-break as spaces, tab and newline, notes,
// comments, frames and numbering labels left out.
//
// In every field a backslash, tab, newline and carriage return are written
// \\, \t, \n and \r, any other control character \xNN: a line is one
// record, a field never holds a tab.
//
// Bounds, each a non-zero status, never a hang: the file (and, zipped,
// content.xml and styles.xml inflated together) at most CheckMaxDoc bytes
// (CheckTooLarge), XML nesting at most odfMaxDepth and odfMaxTokens tokens
// (CheckTooLarge), a sheet at most odfMaxRows rows by odfMaxCols columns (a
// non-empty cell beyond: CheckTooLarge; repeated empty rows and cells are
// counted, never expanded), text gathered (text:s counts its spaces) and
// output at most CheckMaxDocOutput bytes each (CheckTooLarge: repeated
// non-empty cells are written out). XML that is
// not well-formed (an entity other than XML's own five is), a zip without
// content.xml (.xlsx, .docx are not read), a spreadsheet asked for its
// paragraphs or the reverse: CheckMismatch.

// CheckMaxDoc bounds the bytes cells and paras read (4 MiB).
const CheckMaxDoc = 4 << 20

// CheckMaxDocOutput bounds what cells and paras write (8 MiB).
const CheckMaxDocOutput = 8 << 20

const (
	odfMaxDepth  = 256
	odfMaxTokens = 2 << 20
	odfMaxRows   = 1 << 20 // LibreOffice's 1,048,576
	odfMaxCols   = 1 << 14 // XFD, LibreOffice's largest (1024 by default before 24.2)
	// odfMaxRepeat bounds a repeat attribute's value, so that sums of
	// them never overflow.
	odfMaxRepeat = 1 << 31
	// odfMaxChain bounds a style's parents followed.
	odfMaxChain = 32
)

// ODF namespaces.
const (
	nsOffice  = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
	nsStyle   = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
	nsText    = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
	nsTable   = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
	nsFO      = "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"
	nsNumber  = "urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0"
	nsDraw    = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
	nsDr3d    = "urn:oasis:names:tc:opendocument:xmlns:dr3d:1.0"
	nsCalcext = "urn:org:documentfoundation:names:experimental:calc:xmlns:calcext:1.0"
)

// checkDoc runs cells or paras on path: opened as read opens a file, then
// read whole (at most CheckMaxDoc bytes) and parsed. The output is written
// only once all of it is known.
func checkDoc(op, path, anchor string, w io.Writer) error {
	if !filepath.IsAbs(path) {
		return failf(CheckUsage, "the path must be absolute")
	}
	dirfd, name, err := walkParent(filepath.Clean(path), anchor)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return openError(err, "")
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	if err != nil {
		return failf(CheckUnreadable, "stat: %v", err)
	}
	if kind := kindOf(st.Mode); kind != "file" {
		return failf(CheckMismatch, "a %s, not a regular file", kind)
	}
	data, err := readDoc(dirfd, name, &st)
	if err != nil {
		return err
	}
	doc, err := parseODF(data)
	if err != nil {
		return err
	}
	out := &docOutput{}
	switch op {
	case "cells":
		err = doc.writeCells(out)
	case "paras":
		err = doc.writeParas(out)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(out.b.Bytes())
	return err
}

// readDoc reads a regular file of at most CheckMaxDoc bytes, opened as
// readFile opens it.
func readDoc(dirfd int, name string, st *unix.Stat_t) ([]byte, error) {
	fd, err := reopen(dirfd, name, 0, st)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if st.Size > CheckMaxDoc {
		return nil, failf(CheckTooLarge, "%d bytes, over the %d a document check reads", st.Size, CheckMaxDoc)
	}
	buf := make([]byte, 0, st.Size+1)
	for len(buf) <= CheckMaxDoc {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(2*cap(buf)+4096, CheckMaxDoc+1))
			copy(nb, buf)
			buf = nb
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, failf(CheckUnreadable, "read: %v", err)
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	if len(buf) > CheckMaxDoc {
		return nil, failf(CheckTooLarge, "over the %d bytes a document check reads", CheckMaxDoc)
	}
	return buf, nil
}

// docOutput is the output, bounded.
type docOutput struct{ b bytes.Buffer }

func (o *docOutput) line(fields ...string) error {
	for i, f := range fields {
		if i > 0 {
			o.b.WriteByte('\t')
		}
		o.b.WriteString(f)
	}
	o.b.WriteByte('\n')
	if o.b.Len() > CheckMaxDocOutput {
		return failf(CheckTooLarge, "over the %d bytes a document check writes", CheckMaxDocOutput)
	}
	return nil
}

// escapeField writes s for a tab-separated line.
func escapeField(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == '\\' || r == 0x7f }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// odfDoc is what a document's parts hold, parsed.
type odfDoc struct {
	styles odfStyles
	body   string // "spreadsheet", "text" or another office:body child
	sheets []*odfSheet
	paras  []*odfPara
}

// parseODF parses a flat document, or a zipped one's styles.xml then
// content.xml.
func parseODF(data []byte) (*odfDoc, error) {
	doc := &odfDoc{styles: odfStyles{auto: map[string]*odfStyle{}, common: map[string]*odfStyle{}, defaults: map[string]*odfStyle{}}}
	if !bytes.HasPrefix(data, []byte("PK\x03\x04")) {
		if err := doc.parsePart(data, partFlat); err != nil {
			return nil, err
		}
	} else {
		content, styles, err := unzipODF(data)
		if err != nil {
			return nil, err
		}
		if styles != nil {
			if err := doc.parsePart(styles, partStyles); err != nil {
				return nil, err
			}
		}
		if err := doc.parsePart(content, partContent); err != nil {
			return nil, err
		}
	}
	if doc.body == "" {
		return nil, failf(CheckMismatch, "no office:body: not an OpenDocument document")
	}
	return doc, nil
}

// unzipODF reads content.xml and styles.xml (nil if absent) from a zipped
// document, inflating at most CheckMaxDoc bytes of them in all.
func unzipODF(data []byte) (content, styles []byte, err error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, nil, failf(CheckMismatch, "not a readable zip: %v", err)
	}
	budget := int64(CheckMaxDoc)
	var found = map[string]*zip.File{}
	for _, f := range zr.File {
		if f.Name != "content.xml" && f.Name != "styles.xml" {
			continue
		}
		if found[f.Name] != nil {
			return nil, nil, failf(CheckMismatch, "%s twice in the zip", f.Name)
		}
		found[f.Name] = f
	}
	read := func(f *zip.File) ([]byte, error) {
		if f.UncompressedSize64 > uint64(budget) {
			return nil, failf(CheckTooLarge, "%s inflates to %d bytes; a document check reads %d", f.Name, f.UncompressedSize64, CheckMaxDoc)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, failf(CheckMismatch, "%s: %v", f.Name, err)
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, budget+1))
		if int64(len(b)) > budget {
			return nil, failf(CheckTooLarge, "%s inflates past the %d bytes a document check reads", f.Name, CheckMaxDoc)
		}
		if err != nil {
			return nil, failf(CheckMismatch, "%s: %v", f.Name, err)
		}
		budget -= int64(len(b))
		return b, nil
	}
	if found["content.xml"] == nil {
		return nil, nil, failf(CheckMismatch, "a zip without content.xml: not an OpenDocument file")
	}
	if content, err = read(found["content.xml"]); err != nil {
		return nil, nil, err
	}
	if f := found["styles.xml"]; f != nil {
		if styles, err = read(f); err != nil {
			return nil, nil, err
		}
	}
	return content, styles, nil
}

// Which part parsePart reads: styles.xml's automatic styles serve its
// master pages only (and reuse content.xml's automatic names), so they are
// left out.
const (
	partFlat = iota
	partStyles
	partContent
)

// odfParser reads one part's tokens, bounded.
type odfParser struct {
	d      *xml.Decoder
	stack  []xml.Name
	tokens int
	// text counts the bytes of text gathered, text:s spaces included,
	// bounded as the output is.
	text int
}

func newODFParser(data []byte) *odfParser {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	// No entities but XML's own, no charset but UTF-8.
	d.Entity = nil
	d.CharsetReader = nil
	return &odfParser{d: d}
}

// next is the next token. The names on the stack are the open elements,
// the one just started included.
func (p *odfParser) next() (xml.Token, error) {
	tok, err := p.d.Token()
	if err == io.EOF {
		if len(p.stack) > 0 {
			return nil, failf(CheckMismatch, "not well-formed XML: unexpected end")
		}
		return nil, io.EOF
	}
	if err != nil {
		return nil, failf(CheckMismatch, "not well-formed XML: %v", err)
	}
	if p.tokens++; p.tokens > odfMaxTokens {
		return nil, failf(CheckTooLarge, "more than %d XML tokens", odfMaxTokens)
	}
	switch t := tok.(type) {
	case xml.StartElement:
		if len(p.stack) >= odfMaxDepth {
			return nil, failf(CheckTooLarge, "XML nested deeper than %d elements", odfMaxDepth)
		}
		p.stack = append(p.stack, t.Name)
	case xml.EndElement:
		p.stack = p.stack[:len(p.stack)-1]
	}
	return tok, nil
}

// parent is the name of the element around the one just started.
func (p *odfParser) parent() xml.Name {
	if len(p.stack) < 2 {
		return xml.Name{}
	}
	return p.stack[len(p.stack)-2]
}

// skip consumes the rest of the element just started.
func (p *odfParser) skip() error {
	depth := len(p.stack)
	for len(p.stack) >= depth {
		if _, err := p.next(); err != nil {
			if err == io.EOF {
				return failf(CheckMismatch, "not well-formed XML: unexpected end")
			}
			return err
		}
	}
	return nil
}

// within runs f on each element started inside the one just started (f
// must consume what it starts: skip it, or read it whole) and on char data
// (a nil start), until that element ends.
func (p *odfParser) within(f func(se *xml.StartElement, cd xml.CharData) error) error {
	depth := len(p.stack)
	for {
		tok, err := p.next()
		if err == io.EOF {
			return failf(CheckMismatch, "not well-formed XML: unexpected end")
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if err := f(&t, nil); err != nil {
				return err
			}
		case xml.CharData:
			if err := f(nil, t); err != nil {
				return err
			}
		}
		if len(p.stack) < depth {
			return nil
		}
	}
}

func attr(se *xml.StartElement, space, local string) string {
	for _, a := range se.Attr {
		if a.Name.Local == local && a.Name.Space == space {
			return a.Value
		}
	}
	return ""
}

func is(n xml.Name, space, local string) bool { return n.Local == local && n.Space == space }

// parsePart reads one part: its styles, and its body's sheets or
// paragraphs.
func (doc *odfDoc) parsePart(data []byte, part int) error {
	p := newODFParser(data)
	for {
		tok, err := p.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		parent := p.parent()
		switch {
		case is(parent, nsOffice, "styles") || is(parent, nsOffice, "automatic-styles") && part != partStyles:
			auto := is(parent, nsOffice, "automatic-styles")
			if err := doc.styles.read(p, &se, auto); err != nil {
				return err
			}
		case is(parent, nsOffice, "body") && part != partStyles:
			if doc.body != "" {
				return failf(CheckMismatch, "two document bodies")
			}
			doc.body = se.Name.Local
			switch {
			case is(se.Name, nsOffice, "spreadsheet"):
				err = doc.readSpreadsheet(p)
			case is(se.Name, nsOffice, "text"):
				err = doc.readText(p)
			default:
				err = p.skip()
			}
			if err != nil {
				return err
			}
		case is(se.Name, nsOffice, "master-styles"), is(se.Name, nsOffice, "settings"), is(se.Name, nsOffice, "meta"), is(se.Name, nsOffice, "scripts"):
			if err := p.skip(); err != nil {
				return err
			}
		}
	}
}

// Styles.

// tri is an unset, false or true property.
type tri uint8

const (
	unset tri = iota
	no
	yes
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
	case is(se.Name, nsStyle, "style"), is(se.Name, nsStyle, "default-style"):
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
			case is(c.Name, nsStyle, "text-properties"):
				st.bold = weight(attr(c, nsFO, "font-weight"))
				st.italic = slant(attr(c, nsFO, "font-style"))
				st.under = underline(attr(c, nsStyle, "text-underline-style"))
			case is(c.Name, nsStyle, "paragraph-properties"):
				st.align = attr(c, nsFO, "text-align")
			}
			return p.skip()
		})
		if err != nil {
			return err
		}
		if is(se.Name, nsStyle, "default-style") {
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
		return unset
	case "bold":
		return yes
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 600 {
		return yes
	}
	return no
}

func slant(v string) tri {
	switch v {
	case "":
		return unset
	case "italic", "oblique":
		return yes
	}
	return no
}

func underline(v string) tri {
	switch v {
	case "":
		return unset
	case "none":
		return no
	}
	return yes
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
		case is(c.Name, nsNumber, "number"), is(c.Name, nsNumber, "scientific-number"), is(c.Name, nsNumber, "fraction"):
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
		case is(c.Name, nsNumber, "currency-symbol"):
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
	if st.bold == unset {
		st.bold = from.bold
	}
	if st.italic == unset {
		st.italic = from.italic
	}
	if st.under == unset {
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
	all := [3]bool{base.bold == yes, base.italic == yes, base.under == yes}
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
				if eff[k] == unset {
					eff[k] = v
				}
			}
		}
		for k := range all {
			all[k] = all[k] && eff[k] == yes
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
	case is(n, nsOffice, "annotation"), is(n, nsText, "note"), is(n, nsText, "number"), is(n, nsText, "tracked-changes"):
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
	case is(se.Name, nsText, "s"):
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
	case is(se.Name, nsText, "tab"):
		t.ignore = false
		if err := t.add("\t"); err != nil {
			return err
		}
		return t.p.skip()
	case is(se.Name, nsText, "line-break"):
		t.ignore = false
		if err := t.add("\n"); err != nil {
			return err
		}
		return t.p.skip()
	case is(se.Name, nsText, "span"):
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

// Spreadsheets.

type odfSheet struct {
	name string
	cols []odfColRun
	rows []*odfRow
}

// odfColRun is table:table-column's default cell style over columns.
type odfColRun struct {
	c0, n int64
	style string
}

// odfRow is a row element with a non-empty cell: rows r0..r0+n-1.
type odfRow struct {
	r0, n int64
	style string
	cells []odfCellRun
}

// odfCellRun is a non-empty cell element: columns c0..c0+n-1.
type odfCellRun struct {
	c0, n int64
	cell  *odfCell
}

type odfCell struct {
	style, typ, value, formula string
	spanCols, spanRows         int64
	// runs is the cell's text where some of it is in spans.
	runs []*odfRun
}

// repeat reads a repeat count: a positive integer, at most odfMaxRepeat
// (a larger one is odfMaxRepeat); anything else is 1.
func repeat(se *xml.StartElement, local string) int64 {
	v, err := strconv.ParseInt(attr(se, nsTable, local), 10, 64)
	if errors.Is(err, strconv.ErrRange) && v > 0 {
		return odfMaxRepeat
	}
	if err != nil || v < 1 {
		return 1
	}
	return min(v, odfMaxRepeat)
}

func (doc *odfDoc) readSpreadsheet(p *odfParser) error {
	return p.within(func(se *xml.StartElement, _ xml.CharData) error {
		if se == nil {
			return nil
		}
		if !is(se.Name, nsTable, "table") {
			return p.skip()
		}
		sh := &odfSheet{name: attr(se, nsTable, "name")}
		doc.sheets = append(doc.sheets, sh)
		return sh.read(p)
	})
}

// tableGroups are the elements that group a table's rows or columns.
var tableGroups = map[string]bool{
	"table-row-group": true, "table-header-rows": true, "table-rows": true,
	"table-column-group": true, "table-header-columns": true, "table-columns": true,
}

func (sh *odfSheet) read(p *odfParser) error {
	var row, col int64
	var visit func(se *xml.StartElement, _ xml.CharData) error
	visit = func(se *xml.StartElement, _ xml.CharData) error {
		switch {
		case se == nil:
			return nil
		case se.Name.Space == nsTable && tableGroups[se.Name.Local]:
			return p.within(visit)
		case is(se.Name, nsTable, "table-column"):
			n := repeat(se, "number-columns-repeated")
			if st := attr(se, nsTable, "default-cell-style-name"); st != "" && col < odfMaxCols {
				sh.cols = append(sh.cols, odfColRun{col, n, st})
			}
			col += n
			return p.skip()
		case is(se.Name, nsTable, "table-row"):
			r, n, err := readRow(p, se)
			if err != nil {
				return err
			}
			if r != nil {
				if row >= odfMaxRows {
					return failf(CheckTooLarge, "a cell beyond row %d", odfMaxRows)
				}
				r.r0, r.n = row, min(n, odfMaxRows-row)
				sh.rows = append(sh.rows, r)
			}
			row += n
			return nil
		}
		return p.skip()
	}
	return p.within(visit)
}

// readRow reads a row; nil if all its cells are empty.
func readRow(p *odfParser, se *xml.StartElement) (*odfRow, int64, error) {
	n := repeat(se, "number-rows-repeated")
	r := &odfRow{style: attr(se, nsTable, "default-cell-style-name")}
	var col int64
	err := p.within(func(c *xml.StartElement, _ xml.CharData) error {
		if c == nil {
			return nil
		}
		if !is(c.Name, nsTable, "table-cell") && !is(c.Name, nsTable, "covered-table-cell") {
			return p.skip()
		}
		k := repeat(c, "number-columns-repeated")
		cell, err := readCell(p, c)
		if err != nil {
			return err
		}
		if cell != nil {
			if col >= odfMaxCols {
				return failf(CheckTooLarge, "a cell beyond column %d", odfMaxCols)
			}
			r.cells = append(r.cells, odfCellRun{col, min(k, odfMaxCols-col), cell})
		}
		col += k
		return nil
	})
	if err != nil || len(r.cells) == 0 {
		return nil, n, err
	}
	return r, n, nil
}

// readCell reads a cell; nil if it is empty (no value, formula or text).
func readCell(p *odfParser, se *xml.StartElement) (*odfCell, error) {
	c := &odfCell{
		style:    attr(se, nsTable, "style-name"),
		typ:      attr(se, nsOffice, "value-type"),
		formula:  attr(se, nsTable, "formula"),
		spanCols: repeat(se, "number-columns-spanned"),
		spanRows: repeat(se, "number-rows-spanned"),
	}
	var paras []string
	var runs []*odfRun
	spans := false
	err := p.within(func(e *xml.StartElement, _ xml.CharData) error {
		switch {
		case e == nil:
			return nil
		case is(e.Name, nsText, "p"), is(e.Name, nsText, "h"):
			t := &textReader{p: p}
			if err := t.paragraph(); err != nil {
				return err
			}
			paras = append(paras, t.text())
			for _, r := range t.runs {
				spans = spans || len(r.spans) > 0
			}
			runs = append(runs, t.runs...)
			return nil
		}
		// Comments, frames, sub-tables: not the cell's text.
		return p.skip()
	})
	if err != nil {
		return nil, err
	}
	text := strings.Join(paras, "\n")
	switch c.typ {
	case "float", "percentage", "currency":
		c.value = canonNumber(attr(se, nsOffice, "value"))
	case "date":
		c.value = attr(se, nsOffice, "date-value")
	case "time":
		c.value = attr(se, nsOffice, "time-value")
	case "boolean":
		c.value = attr(se, nsOffice, "boolean-value")
	case "string":
		c.value = text
		if sv := attr(se, nsOffice, "string-value"); sv != "" {
			c.value = sv
		}
	case "":
		if text != "" {
			c.typ, c.value = "string", text
		}
	default:
		c.value = text
	}
	if attr(se, nsCalcext, "value-type") == "error" {
		c.typ, c.value = "error", text
	}
	if c.typ == "" && c.formula == "" {
		return nil, nil
	}
	if spans {
		c.runs = runs
	}
	return c, nil
}

// canonNumber writes a number in shortest plain decimal; what is no
// finite number stays as written.
func canonNumber(s string) string {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return s
	}
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// cellName is the A1 name of a cell (0-based row and column).
func cellName(row, col int64) string {
	s := ""
	for col++; col > 0; col = (col - 1) / 26 {
		s = string(rune('A'+(col-1)%26)) + s
	}
	return s + strconv.FormatInt(row+1, 10)
}

func (doc *odfDoc) writeCells(out *docOutput) error {
	if doc.body != "spreadsheet" {
		return failf(CheckMismatch, "a %s document, not a spreadsheet", doc.body)
	}
	for _, sh := range doc.sheets {
		name := escapeField(sh.name)
		// Props by the style name a cell falls back on.
		props := map[string]string{}
		propsOf := func(c *odfCell, rowStyle string, col int64) string {
			name := c.style
			if name == "" {
				name = rowStyle
			}
			if name == "" {
				name = sh.colStyle(col)
			}
			p, ok := props[name]
			if c.runs != nil {
				p = doc.cellProps(name, c.runs)
			} else if !ok {
				p = doc.cellProps(name, nil)
				props[name] = p
			}
			if c.spanCols > 1 || c.spanRows > 1 {
				if p != "" {
					p += ","
				}
				p += fmt.Sprintf("merge=%dx%d", c.spanCols, c.spanRows)
			}
			return p
		}
		for _, r := range sh.rows {
			for i := int64(0); i < r.n; i++ {
				for _, cr := range r.cells {
					c := cr.cell
					value, formula := escapeField(c.value), escapeField(c.formula)
					for j := int64(0); j < cr.n; j++ {
						col := cr.c0 + j
						if err := out.line(name, cellName(r.r0+i, col), value, formula, c.typ, propsOf(c, r.style, col)); err != nil {
							return err
						}
					}
				}
			}
		}
	}
	return nil
}

// colStyle is column col's default cell style.
func (sh *odfSheet) colStyle(col int64) string {
	for _, c := range sh.cols {
		if col >= c.c0 && col < c.c0+c.n {
			return c.style
		}
	}
	return ""
}

// cellProps are a cell's props: the font (its style's, or its text's
// where spans make all of it so), then its style's number format.
func (doc *odfDoc) cellProps(name string, runs []*odfRun) string {
	if name == "" {
		name = "Default"
	}
	st := doc.styles.resolve("table-cell", name)
	if st == nil {
		st = doc.styles.defaults["table-cell"]
	}
	if st == nil {
		st = &odfStyle{}
	}
	props := doc.styles.fontOf(runs, st)
	if st.data != "" {
		if ds := doc.styles.lookup("data", st.data, true); ds != nil && ds.numFormat != "" {
			props = append(props, ds.numFormat)
		}
	}
	return escapeField(strings.Join(props, ","))
}

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
		case skippedInline(se.Name), is(se.Name, nsOffice, "forms"):
			return p.skip()
		case is(se.Name, nsText, "p"), is(se.Name, nsText, "h"):
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
		case is(se.Name, nsText, "list-item"), is(se.Name, nsText, "list-header"):
			list++
			defer func() { list-- }()
		case is(se.Name, nsTable, "table-cell"), is(se.Name, nsTable, "covered-table-cell"):
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
