package configs

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Flat OpenDocument files a template can generate (docs/tasks.md,
// "Templates"): a spreadsheet (.fods) and a text document (.fodt), each one
// XML file, no zip, so they travel as a put_file step's text. LibreOffice
// opens them as its own formats and saves them back flat, with no "keep
// the current format" question.
//
//	fods TABLE [OPTION...] [TABLE [OPTION...]]...
//	fodt PARAGRAPHS...
//
// fods writes one sheet per table. A table is a table parameter (its header
// is the sheet's first row, bold), rows of cells ([][]string), or a list of
// lines whose cells are separated by tabs. The options after a table are
// its sheet's:
//
//	sheet=NAME     the sheet's name (default Sheet1, Sheet2, ...)
//	header=no      leave a table parameter's header out
//	COL=FORMAT     the format of a column, named by its header or its
//	               letter (A, B, ...): auto (the default), text, number,
//	               currency (USD; currency:EUR, GBP, JPY), percent, date,
//	               each optionally followed by ",bold" and/or ",italic"
//	               (or just bold, italic: auto in that font)
//
// An auto cell is a number if its text is a decimal ("12", "-3.50"), shown
// with the decimals it was written with; "$12.50" is a dollar amount,
// "12.5%" a percentage, "2024-05-01" a date, and a text starting with "="
// a formula in spreadsheet notation ("=SUM(B2:B5)", "=B2*C2"; references
// to the same sheet, "," or ";" between arguments), written as OpenFormula
// for LibreOffice to compute on load; anything else is text. A currency or
// percent cell is a decimal with or without its sign ("12.5" in a percent
// column is 12.5%); a formula there takes the column's format. A text
// column's cells are all text. An empty cell is empty.
//
// fodt writes a paragraph per line of its arguments (lists, or texts whose
// lines are paragraphs): "# " starts a Heading 1, "## " a Heading 2, "### "
// a Heading 3, anything else is a body paragraph (style Standard); within
// a line, **bold** and *italic* are spans (a marker without its pair stays
// as written).

// maxODFCells bounds a generated document's cells (or paragraphs).
const maxODFCells = 100_000

const odfNamespaces = `xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" ` +
	`xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" ` +
	`xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" ` +
	`xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" ` +
	`xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" ` +
	`xmlns:number="urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0" ` +
	`xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" ` +
	`office:version="1.3"`

// odfParagraphs writes a cell's text as paragraphs, one a line.
func odfParagraphs(s string) (string, error) {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		w := newODFText(true)
		w.text(l)
		t, err := w.finish()
		if err != nil {
			return "", err
		}
		b.WriteString("<text:p>" + t + "</text:p>")
	}
	return b.String(), nil
}

// odfText writes a paragraph's text: ODF collapses a run of white space
// into one space and drops it at a paragraph's start, so a space after
// another (or at the start or end) is <text:s/> (<text:s text:c="N"/> for
// N), and a tab <text:tab/>. A character XML cannot hold is an error, and
// so is a tab in a cell's text (inCell): Calc drops it on load.
type odfText struct {
	b       strings.Builder
	inCell  bool
	pending int  // spaces not yet written
	needS   bool // a plain space here would be collapsed or dropped
	err     error
}

func newODFText(inCell bool) *odfText { return &odfText{inCell: inCell, needS: true} }

func (w *odfText) text(s string) {
	for _, r := range s {
		if r == ' ' {
			w.pending++
			continue
		}
		w.flush(false)
		switch {
		case r == '\t' && w.inCell:
			w.fail(fmt.Errorf("a tab cannot be in a cell (Calc drops it)"))
		case r == '\t':
			w.b.WriteString("<text:tab/>")
		case r == '\n' || r == '\r' || r == utf8.RuneError || !xmlChar(r):
			w.fail(fmt.Errorf("character %U cannot be in a document", r))
		default:
			w.b.WriteString(xmlText(string(r)))
		}
		w.needS = false
	}
}

// raw writes markup (a span's tag), which is no character.
func (w *odfText) raw(tag string) {
	w.flush(false)
	w.b.WriteString(tag)
}

// flush writes the pending spaces; at the end they are all <text:s/>.
func (w *odfText) flush(end bool) {
	n := w.pending
	if n == 0 {
		return
	}
	w.pending = 0
	if !w.needS && !end {
		w.b.WriteByte(' ')
		n--
	}
	w.needS = true // after a space, another is <text:s/>
	if n == 0 {
		return
	}
	if n == 1 {
		w.b.WriteString("<text:s/>")
	} else {
		fmt.Fprintf(&w.b, `<text:s text:c="%d"/>`, n)
	}
}

func (w *odfText) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *odfText) finish() (string, error) {
	w.flush(true)
	return w.b.String(), w.err
}

// xmlChar reports a character XML 1.0 allows in text.
func xmlChar(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

var (
	textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "\t", "&#9;", "\n", "&#10;", "\r", "&#13;")
)

func xmlText(s string) string { return textEscaper.Replace(s) }
func xmlAttr(s string) string { return attrEscaper.Replace(s) }
