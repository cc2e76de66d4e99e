package guest

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
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

// readDocAt reads the document at path as read opens a file (no link
// followed from anchor down, a regular file) and whole, at most CheckMaxDoc
// bytes.
func readDocAt(path, anchor string) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, failf(CheckUsage, "the path must be absolute")
	}
	dirfd, name, err := walkParent(filepath.Clean(path), anchor)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dirfd)
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, openError(err, "")
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	if err != nil {
		return nil, failf(CheckUnreadable, "stat: %v", err)
	}
	if kind := kindOf(st.Mode); kind != "file" {
		return nil, failf(CheckMismatch, "a %s, not a regular file", kind)
	}
	return readDoc(dirfd, name, &st)
}

// checkDoc runs cells or paras on path: opened as read opens a file, then
// read whole (at most CheckMaxDoc bytes) and parsed. The output is written
// only once all of it is known.
func checkDoc(op, path, anchor string, w io.Writer) error {
	data, err := readDocAt(path, anchor)
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

func isElem(n xml.Name, space, local string) bool { return n.Local == local && n.Space == space }

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
		case isElem(parent, nsOffice, "styles") || isElem(parent, nsOffice, "automatic-styles") && part != partStyles:
			auto := isElem(parent, nsOffice, "automatic-styles")
			if err := doc.styles.read(p, &se, auto); err != nil {
				return err
			}
		case isElem(parent, nsOffice, "body") && part != partStyles:
			if doc.body != "" {
				return failf(CheckMismatch, "two document bodies")
			}
			doc.body = se.Name.Local
			switch {
			case isElem(se.Name, nsOffice, "spreadsheet"):
				err = doc.readSpreadsheet(p)
			case isElem(se.Name, nsOffice, "text"):
				err = doc.readText(p)
			default:
				err = p.skip()
			}
			if err != nil {
				return err
			}
		case isElem(se.Name, nsOffice, "master-styles"), isElem(se.Name, nsOffice, "settings"), isElem(se.Name, nsOffice, "meta"), isElem(se.Name, nsOffice, "scripts"):
			if err := p.skip(); err != nil {
				return err
			}
		}
	}
}
