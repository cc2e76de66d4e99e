// The fods template function: a flat OpenDocument spreadsheet, one sheet a
// table, with column formats, currency, percent and date cells, and
// formulas written as OpenFormula.

package configs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// odfSheet is one sheet being built.
type odfSheet struct {
	name    string
	header  []string // nil: no header row
	rows    [][]string
	formats map[int]cellFormat // by column
	// Set by the options, applied once they are all read.
	noHeader bool
	colOpts  []string
}

// cellFormat is a column's format.
type cellFormat struct {
	kind         string // auto, text, number, currency, percent, date
	currency     string // ISO code for currency
	bold, italic bool
}

var currencySymbols = map[string]string{"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}

// fodsDoc is the fods template function.
func fodsDoc(args ...any) (string, error) {
	var sheets []*odfSheet
	for _, a := range args {
		if opt, ok := a.(string); ok {
			if len(sheets) == 0 {
				return "", fmt.Errorf("fods: option %q before any table", opt)
			}
			s := sheets[len(sheets)-1]
			switch {
			case strings.HasPrefix(opt, "sheet="):
				s.name = strings.TrimPrefix(opt, "sheet=")
			case opt == "header=no":
				s.noHeader = true
			case strings.Contains(opt, "="):
				s.colOpts = append(s.colOpts, opt)
			default:
				return "", fmt.Errorf("fods: option %q: want sheet=NAME, header=no or COLUMN=FORMAT", opt)
			}
			continue
		}
		s := &odfSheet{formats: map[int]cellFormat{}}
		switch t := a.(type) {
		case *Table:
			s.header, s.rows = t.Header, t.Rows
		case Table:
			s.header, s.rows = t.Header, t.Rows
		case [][]string:
			s.rows = t
		case []string:
			for _, l := range t {
				s.rows = append(s.rows, strings.Split(l, "\t"))
			}
		case []any:
			for _, r := range t {
				if l, ok := r.(string); ok {
					s.rows = append(s.rows, strings.Split(l, "\t"))
				} else {
					s.rows = append(s.rows, strs(r))
				}
			}
		default:
			return "", fmt.Errorf("fods: %T is not a table (a table parameter, rows of cells, or tab-separated lines)", a)
		}
		sheets = append(sheets, s)
	}
	if len(sheets) == 0 {
		return "", fmt.Errorf("fods: no table")
	}
	b := newODFBuilder()
	var body strings.Builder
	cells := 0
	names := map[string]bool{}
	for i, s := range sheets {
		if s.name == "" {
			s.name = fmt.Sprintf("Sheet%d", i+1)
		}
		if err := checkSheetName(s.name); err != nil {
			return "", err
		}
		if names[strings.ToLower(s.name)] {
			return "", fmt.Errorf("fods: two sheets named %q", s.name)
		}
		names[strings.ToLower(s.name)] = true
		if s.noHeader {
			s.header = nil
		}
		for _, o := range s.colOpts {
			col, spec, _ := strings.Cut(o, "=")
			j, ok := s.column(col)
			if !ok {
				return "", fmt.Errorf("fods: sheet %q has no column %q", s.name, col)
			}
			f, err := parseCellFormat(spec)
			if err != nil {
				return "", fmt.Errorf("fods: column %q: %w", col, err)
			}
			s.formats[j] = f
		}
		width := len(s.header)
		for _, r := range s.rows {
			width = max(width, len(r))
			cells += len(r)
		}
		cells += len(s.header)
		if cells > maxODFCells {
			return "", fmt.Errorf("fods: more than %d cells", maxODFCells)
		}
		fmt.Fprintf(&body, "<table:table table:name=\"%s\">\n", xmlAttr(s.name))
		for j := 0; j < width; j++ {
			fmt.Fprintf(&body, "<table:table-column table:style-name=\"%s\"/>\n", b.columnStyle(s.columnWidth(j)))
		}
		if s.header != nil {
			body.WriteString("<table:table-row>")
			for _, h := range s.header {
				c, err := b.cell(h, cellFormat{kind: "text", bold: true})
				if err != nil {
					return "", fmt.Errorf("fods: sheet %q header: %w", s.name, err)
				}
				body.WriteString(c)
			}
			body.WriteString("</table:table-row>\n")
		}
		for ri, r := range s.rows {
			body.WriteString("<table:table-row>")
			for j, v := range r {
				f, ok := s.formats[j]
				if !ok {
					f = cellFormat{kind: "auto"}
				}
				c, err := b.cell(v, f)
				if err != nil {
					return "", fmt.Errorf("fods: sheet %q row %d column %s: %w", s.name, ri+1, colName(j), err)
				}
				body.WriteString(c)
			}
			body.WriteString("</table:table-row>\n")
		}
		body.WriteString("</table:table>\n")
	}
	var out strings.Builder
	out.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	out.WriteString(`<office:document ` + odfNamespaces + ` office:mimetype="application/vnd.oasis.opendocument.spreadsheet">` + "\n")
	out.WriteString("<office:automatic-styles>\n")
	out.WriteString(b.styles.String())
	out.WriteString("</office:automatic-styles>\n")
	out.WriteString("<office:body>\n<office:spreadsheet>\n")
	out.WriteString(body.String())
	out.WriteString("</office:spreadsheet>\n</office:body>\n</office:document>\n")
	return out.String(), nil
}

// column finds a column by header name, then by letter.
func (s *odfSheet) column(name string) (int, bool) {
	for j, h := range s.header {
		if h == name {
			return j, true
		}
	}
	if j, ok := colIndex(name); ok {
		return j, true
	}
	return 0, false
}

// columnWidth is a width, in tenths of a cm, that shows column j's
// longest text.
func (s *odfSheet) columnWidth(j int) int {
	n := 0
	if j < len(s.header) {
		n = utf8.RuneCountInString(s.header[j])
	}
	for _, r := range s.rows {
		if j < len(r) && !strings.HasPrefix(r[j], "=") {
			n = max(n, utf8.RuneCountInString(r[j]))
		}
	}
	// About 0.2 cm a character at the default 10 pt, in tenths of a cm.
	return min(max(23, 2*n+4), 120)
}

// checkSheetName refuses what LibreOffice refuses in a sheet's name.
func checkSheetName(n string) error {
	if n == "" || strings.ContainsAny(n, "[]*?:/\\\t\n\r") || strings.HasPrefix(n, "'") || strings.HasSuffix(n, "'") {
		return fmt.Errorf("fods: sheet name %q: not empty, no []*?:/\\ or control characters, not quoted", n)
	}
	return nil
}

func parseCellFormat(spec string) (cellFormat, error) {
	parts := strings.Split(spec, ",")
	f := cellFormat{kind: parts[0]}
	switch {
	case f.kind == "currency":
		f.currency = "USD"
	case strings.HasPrefix(f.kind, "currency:"):
		f.kind, f.currency = "currency", strings.TrimPrefix(f.kind, "currency:")
		if currencySymbols[f.currency] == "" {
			return f, fmt.Errorf("currency %q: want USD, EUR, GBP or JPY", f.currency)
		}
	case f.kind == "auto", f.kind == "text", f.kind == "number", f.kind == "percent", f.kind == "date":
	case f.kind == "bold", f.kind == "italic":
		f.kind, parts = "auto", append([]string{""}, parts...)
	default:
		return f, fmt.Errorf("format %q: want auto, text, number, currency[:CODE], percent or date, then ,bold or ,italic", spec)
	}
	for _, p := range parts[1:] {
		switch p {
		case "bold":
			f.bold = true
		case "italic":
			f.italic = true
		default:
			return f, fmt.Errorf("format %q: %q is neither bold nor italic", spec, p)
		}
	}
	return f, nil
}

// colName is the spreadsheet letter of column j (0 is A).
func colName(j int) string {
	s := ""
	for j++; j > 0; j = (j - 1) / 26 {
		s = string(rune('A'+(j-1)%26)) + s
	}
	return s
}

// colIndex reads a column's letters (A is 0), up to three.
func colIndex(s string) (int, bool) {
	if s == "" || len(s) > 3 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < 'A' || c > 'Z' {
			return 0, false
		}
		n = n*26 + int(c-'A'+1)
	}
	return n - 1, true
}

// odfBuilder collects the automatic styles a document's cells need.
type odfBuilder struct {
	styles strings.Builder
	named  map[string]string // a style's definition key → its name
	n      int
}

func newODFBuilder() *odfBuilder { return &odfBuilder{named: map[string]string{}} }

// style returns the name of an automatic style, defining it on first use:
// def is its XML with %s where the name goes.
func (b *odfBuilder) style(prefix, def string) string {
	if name, ok := b.named[def]; ok {
		return name
	}
	b.n++
	name := fmt.Sprintf("%s%d", prefix, b.n)
	b.named[def] = name
	fmt.Fprintf(&b.styles, def+"\n", name)
	return name
}

func (b *odfBuilder) columnStyle(tenths int) string {
	return b.style("co", fmt.Sprintf(`<style:style style:name="%%s" style:family="table-column"><style:table-column-properties style:column-width="%d.%dcm"/></style:style>`, tenths/10, tenths%10))
}

// dataStyle is the number style of a kind with so many decimals.
func (b *odfBuilder) dataStyle(kind, currency string, decimals int) string {
	num := fmt.Sprintf(`<number:number number:decimal-places="%d" number:min-integer-digits="1"`, decimals)
	switch kind {
	case "number":
		return b.style("N", `<number:number-style style:name="%s">`+num+`/></number:number-style>`)
	case "currency":
		return b.style("N", `<number:currency-style style:name="%s"><number:currency-symbol>`+xmlText(currencySymbols[currency])+`</number:currency-symbol>`+num+` number:grouping="true"/></number:currency-style>`)
	case "percent":
		return b.style("N", `<number:percentage-style style:name="%s">`+num+`/><number:text>%%</number:text></number:percentage-style>`)
	case "date":
		return b.style("N", `<number:date-style style:name="%s"><number:year number:style="long"/><number:text>-</number:text><number:month number:style="long"/><number:text>-</number:text><number:day number:style="long"/></number:date-style>`)
	}
	return ""
}

// cellStyle is the automatic cell style of a data style and font; "" for
// none.
func (b *odfBuilder) cellStyle(data string, bold, italic bool) string {
	if data == "" && !bold && !italic {
		return ""
	}
	def := `<style:style style:name="%s" style:family="table-cell" style:parent-style-name="Default"`
	if data != "" {
		def += ` style:data-style-name="` + data + `"`
	}
	def += ">"
	if bold || italic {
		def += "<style:text-properties"
		if bold {
			def += ` fo:font-weight="bold" style:font-weight-asian="bold" style:font-weight-complex="bold"`
		}
		if italic {
			def += ` fo:font-style="italic" style:font-style-asian="italic" style:font-style-complex="italic"`
		}
		def += "/>"
	}
	def += "</style:style>"
	return b.style("ce", def)
}

var (
	decimalRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	dateRE    = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$`)
)

// cell writes one cell of text v in format f.
func (b *odfBuilder) cell(v string, f cellFormat) (string, error) {
	kind, num := f.kind, v
	if kind == "auto" {
		switch {
		case v == "":
			kind = "empty"
		case strings.HasPrefix(v, "="):
			kind = "formula"
		case decimalRE.MatchString(v) && !leadingZero(v):
			kind = "number"
		case strings.HasPrefix(v, "$") && decimalRE.MatchString(v[1:]):
			kind, num, f.currency = "currency", v[1:], "USD"
		case strings.HasPrefix(v, "-$") && decimalRE.MatchString(v[2:]) && v[2] != '-':
			kind, num, f.currency = "currency", "-"+v[2:], "USD"
		case strings.HasSuffix(v, "%") && decimalRE.MatchString(v[:len(v)-1]):
			kind = "percent"
		case dateRE.MatchString(v):
			kind = "date"
		default:
			kind = "text"
		}
	}
	switch {
	case v == "":
		kind = "empty"
	case kind != "text" && strings.HasPrefix(v, "="):
		return b.formulaCell(v, kind, f)
	}
	if kind == "currency" {
		num = strings.TrimPrefix(strings.Replace(num, currencySymbols[f.currency], "", 1), "+")
	}
	if kind == "percent" {
		num = strings.TrimSuffix(num, "%")
	}
	if (kind == "number" || kind == "currency" || kind == "percent") && !decimalRE.MatchString(num) {
		return "", fmt.Errorf("%q is not a decimal", v)
	}
	if kind == "date" && !dateRE.MatchString(v) {
		return "", fmt.Errorf("%q is not a date YYYY-MM-DD", v)
	}
	decimals := 0
	if _, frac, ok := strings.Cut(num, "."); ok {
		decimals = len(frac)
	}
	var attrs, shown string
	data := ""
	switch kind {
	case "empty":
		if st := b.cellStyle("", f.bold, f.italic); st != "" {
			return `<table:table-cell table:style-name="` + st + `"/>`, nil
		}
		return "<table:table-cell/>", nil
	case "text":
		attrs, shown = ` office:value-type="string"`, v
	case "number":
		attrs, shown = ` office:value-type="float" office:value="`+num+`"`, num
		if decimals > 0 {
			data = b.dataStyle("number", "", decimals)
		}
	case "currency":
		d := currencyDecimals(f.currency)
		attrs = ` office:value-type="currency" office:currency="` + f.currency + `" office:value="` + num + `"`
		shown = showCurrency(num, currencySymbols[f.currency], d)
		data = b.dataStyle("currency", f.currency, d)
	case "percent":
		attrs, shown = ` office:value-type="percentage" office:value="`+shiftDecimal(num, 2)+`"`, num+"%"
		data = b.dataStyle("percent", "", decimals)
	case "date":
		attrs, shown = ` office:value-type="date" office:date-value="`+v+`"`, v
		data = b.dataStyle("date", "", 0)
	default:
		return "", fmt.Errorf("format %q", kind)
	}
	if st := b.cellStyle(data, f.bold, f.italic); st != "" {
		attrs = ` table:style-name="` + st + `"` + attrs
	}
	paras, err := odfParagraphs(shown)
	if err != nil {
		return "", err
	}
	return "<table:table-cell" + attrs + ">" + paras + "</table:table-cell>", nil
}

// formulaCell writes a formula cell in its column's number format, with
// no cached value: LibreOffice computes it on load.
func (b *odfBuilder) formulaCell(v, kind string, f cellFormat) (string, error) {
	of, err := openFormula(v)
	if err != nil {
		return "", err
	}
	data := ""
	switch kind {
	case "currency":
		data = b.dataStyle(kind, f.currency, currencyDecimals(f.currency))
	case "percent", "date":
		data = b.dataStyle(kind, "", 0)
	}
	attrs := ` table:formula="` + xmlAttr(of) + `"`
	if st := b.cellStyle(data, f.bold, f.italic); st != "" {
		attrs = ` table:style-name="` + st + `"` + attrs
	}
	return "<table:table-cell" + attrs + "/>", nil
}

func currencyDecimals(code string) int {
	if code == "JPY" {
		return 0
	}
	return 2
}

// leadingZero reports a decimal written with a leading zero ("007"), a
// code rather than a number.
func leadingZero(v string) bool {
	v = strings.TrimPrefix(v, "-")
	return len(v) > 1 && v[0] == '0' && v[1] != '.'
}

// shiftDecimal divides a decimal text by 10^n exactly, as text.
func shiftDecimal(s string, n int) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	whole = strings.Repeat("0", n) + whole
	frac = whole[len(whole)-n:] + frac
	whole = strings.TrimLeft(whole[:len(whole)-n], "0")
	frac = strings.TrimRight(frac, "0")
	if whole == "" {
		whole = "0"
	}
	out := whole
	if frac != "" {
		out += "." + frac
	}
	if neg && out != "0" {
		out = "-" + out
	}
	return out
}

// showCurrency writes an amount as LibreOffice shows it: the symbol, digits
// grouped by thousands, d decimals (rounded half away from zero).
func showCurrency(num, sym string, d int) string {
	v, _ := strconv.ParseFloat(num, 64)
	neg := v < 0
	if neg {
		v = -v
	}
	s := strconv.FormatFloat(v, 'f', d, 64)
	whole, frac, _ := strings.Cut(s, ".")
	var g strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			g.WriteByte(',')
		}
		g.WriteRune(c)
	}
	out := sym + g.String()
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// openFormula turns "=SUM(B2:B5)" into "of:=SUM([.B2:.B5])": references
// into OpenFormula's bracketed ones, "," between arguments into ";".
// Strings in double quotes are kept as written.
func openFormula(f string) (string, error) {
	src := strings.TrimPrefix(f, "=")
	var out strings.Builder
	out.WriteString("of:=")
	isWord := func(c byte) bool {
		return c == '$' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '"':
			j := i + 1
			for ; j < len(src); j++ {
				if src[j] == '"' {
					if j+1 < len(src) && src[j+1] == '"' {
						j++
						continue
					}
					break
				}
			}
			if j >= len(src) {
				return "", fmt.Errorf("formula %q: a string without its closing quote", f)
			}
			out.WriteString(src[i : j+1])
			i = j + 1
		case c == ',':
			out.WriteByte(';')
			i++
		case isWord(c):
			j := i
			for j < len(src) && isWord(src[j]) {
				j++
			}
			word := src[i:j]
			k := j
			for k < len(src) && src[k] == ' ' {
				k++
			}
			ref, ok := cellRef(word)
			if !ok || (k < len(src) && src[k] == '(') {
				out.WriteString(word)
				i = j
				continue
			}
			// A range: REF:REF.
			if j < len(src) && src[j] == ':' {
				e := j + 1
				for e < len(src) && isWord(src[e]) {
					e++
				}
				if ref2, ok := cellRef(src[j+1 : e]); ok {
					out.WriteString("[." + ref + ":." + ref2 + "]")
					i = e
					continue
				}
			}
			out.WriteString("[." + ref + "]")
			i = j
		default:
			out.WriteByte(c)
			i++
		}
	}
	return out.String(), nil
}

var cellRefRE = regexp.MustCompile(`^(\$?)([A-Za-z]{1,3})(\$?)([1-9][0-9]{0,6})$`)

// cellRef reads an A1 reference (with $ for absolute parts), upper-cased.
func cellRef(w string) (string, bool) {
	m := cellRefRE.FindStringSubmatch(w)
	if m == nil {
		return "", false
	}
	return m[1] + strings.ToUpper(m[2]) + m[3] + m[4], true
}
