package configs

import (
	"fmt"
	"regexp"
	"strconv"
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
