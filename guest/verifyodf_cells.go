// The verifier's cells op: a spreadsheet's sheets, rows and cells, read
// from its body and written out with their values, styles and formats.

package guest

import (
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

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
		if !isElem(se.Name, nsTable, "table") {
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
		case isElem(se.Name, nsTable, "table-column"):
			n := repeat(se, "number-columns-repeated")
			if st := attr(se, nsTable, "default-cell-style-name"); st != "" && col < odfMaxCols {
				sh.cols = append(sh.cols, odfColRun{col, n, st})
			}
			col += n
			return p.skip()
		case isElem(se.Name, nsTable, "table-row"):
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
		if !isElem(c.Name, nsTable, "table-cell") && !isElem(c.Name, nsTable, "covered-table-cell") {
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
		case isElem(e.Name, nsText, "p"), isElem(e.Name, nsText, "h"):
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
