package guest

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The document ops of the verifier library (cells, paras) on honest
// documents, flat and zipped, written the way LibreOffice writes them, and
// on hostile ones: each hostile file fails with its status at once.

const odfNS = `xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" ` +
	`xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" ` +
	`xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" ` +
	`xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" ` +
	`xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" ` +
	`xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" ` +
	`xmlns:number="urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0" ` +
	`xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" ` +
	`xmlns:calcext="urn:org:documentfoundation:names:experimental:calc:xmlns:calcext:1.0" ` +
	`office:version="1.3"`

// A spreadsheet as LibreOffice writes one: a column's format as its
// default cell style, repeated cells and rows (the trailing empty ones up
// to the sheet's end), a comment, an error, a merged cell.
const (
	odsStyles = `<office:styles>
  <style:default-style style:family="table-cell"><style:text-properties style:font-name="Liberation Sans"/></style:default-style>
  <number:currency-style style:name="N121"><number:currency-symbol number:language="en" number:country="US">$</number:currency-symbol><number:number number:decimal-places="2" number:min-decimal-places="2" number:min-integer-digits="1" number:grouping="true"/></number:currency-style>
  <style:style style:name="Default" style:family="table-cell"/>
  <style:style style:name="Heading" style:family="table-cell" style:parent-style-name="Default"><style:text-properties fo:font-weight="bold"/></style:style>
 </office:styles>
`
	odsAuto = `<office:automatic-styles>
  <number:percentage-style style:name="N10"><number:number number:decimal-places="1" number:min-decimal-places="1" number:min-integer-digits="1"/><number:text>%</number:text></number:percentage-style>
  <style:style style:name="ce1" style:family="table-cell" style:parent-style-name="Default"><style:text-properties fo:font-weight="bold" style:font-weight-asian="bold" style:font-weight-complex="bold"/></style:style>
  <style:style style:name="ce2" style:family="table-cell" style:parent-style-name="Default" style:data-style-name="N121"/>
  <style:style style:name="ce3" style:family="table-cell" style:parent-style-name="Default" style:data-style-name="N10"><style:text-properties fo:font-style="italic"/></style:style>
  <style:style style:name="ce4" style:family="table-cell" style:parent-style-name="Heading"/>
  <style:style style:name="ce5" style:family="table-cell" style:parent-style-name="Heading"><style:text-properties fo:font-weight="normal" style:text-underline-style="solid"/></style:style>
  <style:style style:name="T1" style:family="text"><style:text-properties fo:font-weight="bold"/></style:style>
 </office:automatic-styles>
`
	odsBody = `<office:body>
  <office:spreadsheet>
   <table:table table:name="Sales" table:style-name="ta1">
    <table:table-column table:number-columns-repeated="2" table:default-cell-style-name="Default"/>
    <table:table-column table:default-cell-style-name="ce2"/>
    <table:table-column table:number-columns-repeated="1021" table:default-cell-style-name="Default"/>
    <table:table-header-rows>
     <table:table-row>
      <table:table-cell table:style-name="ce1" office:value-type="string" calcext:value-type="string">
       <text:p>item</text:p>
      </table:table-cell>
      <table:table-cell table:style-name="ce1" table:number-columns-repeated="2" office:value-type="string" calcext:value-type="string"><text:p>dup</text:p></table:table-cell>
      <table:table-cell table:number-columns-repeated="1021"/>
     </table:table-row>
    </table:table-header-rows>
    <table:table-row>
     <table:table-cell office:value-type="string"><text:p>a <text:s/>b<text:tab/>c</text:p><text:p>line2</text:p><office:annotation><text:p>a comment</text:p></office:annotation></table:table-cell>
     <table:table-cell office:value-type="float" office:value="1234.50"><text:p>1234.5</text:p></table:table-cell>
     <table:table-cell office:value-type="currency" office:currency="USD" office:value="-0.10"><text:p>-$0.10</text:p></table:table-cell>
     <table:table-cell table:style-name="ce3" office:value-type="percentage" office:value="0.125"><text:p>12.5%</text:p></table:table-cell>
    </table:table-row>
    <table:table-row table:number-rows-repeated="2"><table:table-cell office:value-type="float" office:value="7"><text:p>7</text:p></table:table-cell><table:table-cell table:number-columns-repeated="1023"/></table:table-row>
    <table:table-row>
     <table:table-cell table:formula="of:=SUM([.B2:.B4])" office:value-type="float" office:value="1.5E+3" calcext:value-type="float"><text:p>1500</text:p></table:table-cell>
     <table:table-cell table:formula="of:=1/0" office:value-type="float" office:value="0" calcext:value-type="error"><text:p>#DIV/0!</text:p></table:table-cell>
     <table:table-cell table:formula="of:=IF(1;&quot;big&quot;)" office:value-type="string" office:string-value="big" calcext:value-type="string"><text:p>big</text:p></table:table-cell>
     <table:table-cell office:value-type="date" office:date-value="2024-05-01"><text:p>05/01/24</text:p></table:table-cell>
     <table:table-cell office:value-type="boolean" office:boolean-value="true"><text:p>TRUE</text:p></table:table-cell>
     <table:table-cell office:value-type="time" office:time-value="PT12H30M00S"><text:p>12:30:00</text:p></table:table-cell>
    </table:table-row>
    <table:table-row>
     <table:table-cell table:style-name="ce4" table:number-columns-spanned="2" table:number-rows-spanned="1" office:value-type="string"><text:p>merged</text:p></table:table-cell>
     <table:covered-table-cell/>
     <table:table-cell table:style-name="ce5" office:value-type="string"><text:p>under</text:p></table:table-cell>
     <table:table-cell table:style-name="ce1"/>
     <table:table-cell><draw:frame><draw:text-box><text:p>a shape</text:p></draw:text-box></draw:frame></table:table-cell>
     <table:table-cell office:value-type="string"><text:p><text:span text:style-name="T1">all</text:span> <text:span text:style-name="T1">bold</text:span></text:p></table:table-cell>
     <table:table-cell office:value-type="string"><text:p>half <text:span text:style-name="T1">bold</text:span></text:p></table:table-cell>
    </table:table-row>
    <table:table-row table:number-rows-repeated="1048569"><table:table-cell table:number-columns-repeated="1024"/></table:table-row>
   </table:table>
   <table:table table:name="Two"><table:table-row><table:table-cell office:value-type="string"><text:p>x\y</text:p></table:table-cell></table:table-row></table:table>
  </office:spreadsheet>
 </office:body>
`
)

const wantCells = `Sales	A1	item		string	bold
Sales	B1	dup		string	bold
Sales	C1	dup		string	bold
Sales	A2	a  b\tc\nline2		string	
Sales	B2	1234.5		float	
Sales	C2	-0.1		currency	currency=$,decimals=2,grouping
Sales	D2	0.125		percentage	italic,percent,decimals=1
Sales	A3	7		float	
Sales	A4	7		float	
Sales	A5	1500	of:=SUM([.B2:.B4])	float	
Sales	B5	#DIV/0!	of:=1/0	error	
Sales	C5	big	of:=IF(1;"big")	string	currency=$,decimals=2,grouping
Sales	D5	2024-05-01		date	
Sales	E5	true		boolean	
Sales	F5	PT12H30M00S		time	
Sales	A6	merged		string	bold,merge=2x1
Sales	C6	under		string	underline
Sales	F6	all bold		string	bold
Sales	G6	half bold		string	
Two	A1	x\\y		string	
`

// A text document: headings, a centered italic paragraph, bold through
// spans (automatic and common styles), a note, a comment and a frame
// (not the text), a list, a table.
const (
	odtStyles = `<office:styles>
  <style:default-style style:family="paragraph"><style:paragraph-properties fo:text-align="start"/><style:text-properties fo:font-size="12pt"/></style:default-style>
  <style:style style:name="Standard" style:family="paragraph" style:class="text"/>
  <style:style style:name="Text_20_body" style:display-name="Text body" style:family="paragraph" style:parent-style-name="Standard"/>
  <style:style style:name="Heading_20_1" style:display-name="Heading 1" style:family="paragraph" style:parent-style-name="Standard" style:default-outline-level="1"><style:text-properties fo:font-weight="bold"/></style:style>
  <style:style style:name="Strong_20_Emphasis" style:display-name="Strong Emphasis" style:family="text"><style:text-properties fo:font-weight="bold"/></style:style>
 </office:styles>
`
	odtAuto = `<office:automatic-styles>
  <style:style style:name="P1" style:family="paragraph" style:parent-style-name="Text_20_body"><style:paragraph-properties fo:text-align="center"/><style:text-properties fo:font-style="italic"/></style:style>
  <style:style style:name="T1" style:family="text"><style:text-properties fo:font-weight="bold"/></style:style>
  <style:style style:name="T2" style:family="text"><style:text-properties fo:font-weight="normal"/></style:style>
 </office:automatic-styles>
`
	odtBody = `<office:body>
  <office:text>
   <text:sequence-decls><text:sequence-decl text:display-outline-level="0" text:name="Table"/></text:sequence-decls>
   <text:h text:style-name="Heading_20_1" text:outline-level="1"><text:number>1.</text:number>Intro</text:h>
   <text:p text:style-name="P1">centered <text:span text:style-name="T1">and</text:span> italic</text:p>
   <text:p text:style-name="Standard"><text:span text:style-name="T1">all bold</text:span> <text:span text:style-name="Strong_20_Emphasis">too</text:span></text:p>
   <text:h text:style-name="Heading_20_1" text:outline-level="2">Not <text:span text:style-name="T2">bold</text:span></text:h>
   <text:p>
     spaced   out <text:s text:c="2"/>x<text:tab/>y<text:line-break/>z\ back<text:note text:note-class="footnote"><text:note-citation>1</text:note-citation><text:note-body><text:p>foot</text:p></text:note-body></text:note><office:annotation><text:p>comment</text:p></office:annotation></text:p>
   <text:list><text:list-item><text:p text:style-name="Standard">item one</text:p></text:list-item></text:list>
   <table:table><table:table-row><table:table-cell><text:p text:style-name="Text_20_body">in table</text:p></table:table-cell></table:table-row></table:table>
   <draw:frame><draw:text-box><text:p>frame text</text:p></draw:text-box></draw:frame>
   <text:p text:style-name="Standard"/>
  </office:text>
 </office:body>
`
)

const wantParas = "h\t1\tbold\tIntro\n" +
	"p\tText body\titalic,align=center\tcentered and italic\n" +
	"p\tStandard\tbold\tall bold too\n" +
	"h\t2\t\tNot bold\n" +
	"p\tStandard\t\tspaced out   x\\ty\\nz\\\\ back\n" +
	"p\tStandard\tlist\titem one\n" +
	"p\tText body\ttable\tin table\n" +
	"p\tStandard\t\t\n"

func flatODF(mimetype, styles, auto, body string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>` + "\n<office:document " + odfNS +
		` office:mimetype="application/vnd.oasis.opendocument.` + mimetype + `">` + "\n" +
		styles + auto + body + "</office:document>\n"
}

// zipODF is a zipped document: content.xml with the automatic styles and
// the body, styles.xml with the common styles and automatic styles of its
// own (which the ops must not confuse with content.xml's).
func zipODF(t *testing.T, mimetype, styles, auto, body string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	add := func(name, s string, method uint16) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	add("mimetype", "application/vnd.oasis.opendocument."+mimetype, zip.Store)
	add("content.xml", `<?xml version="1.0" encoding="UTF-8"?>`+"\n<office:document-content "+odfNS+">"+auto+body+"</office:document-content>", zip.Deflate)
	add("styles.xml", `<?xml version="1.0" encoding="UTF-8"?>`+"\n<office:document-styles "+odfNS+">"+styles+
		`<office:automatic-styles><style:style style:name="P1" style:family="paragraph"><style:text-properties fo:font-weight="bold"/></style:style>`+
		`<style:style style:name="ce3" style:family="table-cell"><style:text-properties fo:font-weight="bold"/></style:style></office:automatic-styles>`+
		"</office:document-styles>", zip.Deflate)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// runCheck runs one op in this process, failing the test if it takes more
// than 10 s.
func runCheck(t *testing.T, anchor string, args ...string) (string, string, int) {
	t.Helper()
	type result struct {
		out, err string
		status   int
	}
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		st := Check(args, anchor, &out, &errb)
		done <- result{out.String(), errb.String(), st}
	}()
	select {
	case r := <-done:
		return r.out, r.err, r.status
	case <-time.After(10 * time.Second):
		t.Fatalf("check %q hung", args)
	}
	return "", "", 0
}

func TestCellsAndParas(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{
		"sheet.fods": []byte(flatODF("spreadsheet", odsStyles, odsAuto, odsBody)),
		"sheet.ods":  zipODF(t, "spreadsheet", odsStyles, odsAuto, odsBody),
		// The name does not decide: content does.
		"sheet.txt": zipODF(t, "spreadsheet", odsStyles, odsAuto, odsBody),
		"text.fodt": []byte(flatODF("text", odtStyles, odtAuto, odtBody)),
		"text.odt":  zipODF(t, "text", odtStyles, odtAuto, odtBody),
		"unstyled.fods": []byte(flatODF("spreadsheet", "", "", `<office:body><office:spreadsheet><table:table table:name="S">`+
			`<table:table-row><table:table-cell table:style-name="nope" office:value-type="float" office:value="-0"/></table:table-row></table:table></office:spreadsheet></office:body>`)),
	}
	for name, data := range files {
		writeFile(t, filepath.Join(dir, name), data, 0o644)
	}
	for _, c := range []struct{ op, file, want string }{
		{"cells", "sheet.fods", wantCells},
		{"cells", "sheet.ods", wantCells},
		{"cells", "sheet.txt", wantCells},
		{"paras", "text.fodt", wantParas},
		{"paras", "text.odt", wantParas},
		{"cells", "unstyled.fods", "S\tA1\t0\t\tfloat\t\n"},
	} {
		out, errs, st := runCheck(t, dir, c.op, filepath.Join(dir, c.file))
		if st != CheckOK || out != c.want {
			t.Errorf("%s %s: status %d (%s)\n%s\nwant\n%s", c.op, c.file, st, errs, out, c.want)
		}
	}
	// The wrong kind of document.
	for _, c := range [][2]string{{"cells", "text.fodt"}, {"paras", "sheet.ods"}} {
		if _, _, st := runCheck(t, dir, c[0], filepath.Join(dir, c[1])); st != CheckMismatch {
			t.Errorf("%s %s: status %d; want %d", c[0], c[1], st, CheckMismatch)
		}
	}
}

// zipBomb is a zip whose content.xml inflates to n bytes of spaces; with
// lie, its header says 100 bytes.
func zipBomb(t *testing.T, n int, lie bool) []byte {
	t.Helper()
	var raw bytes.Buffer
	fw, _ := flate.NewWriter(&raw, flate.BestCompression)
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for i := 0; i < n>>20; i++ {
		fw.Write(chunk)
	}
	fw.Close()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	size := uint64(n)
	if lie {
		size = 100
	}
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "content.xml", Method: zip.Deflate, CompressedSize64: uint64(raw.Len()), UncompressedSize64: size})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(raw.Bytes())
	zw.Close()
	return b.Bytes()
}

func TestCellsHostileFiles(t *testing.T) {
	dir := t.TempDir()
	sheet := func(rows string) []byte {
		return []byte(flatODF("spreadsheet", "", "", `<office:body><office:spreadsheet><table:table table:name="S">`+rows+`</table:table></office:spreadsheet></office:body>`))
	}
	one := `<table:table-cell office:value-type="float" office:value="1"/>`
	deep := strings.Repeat("<text:span>", 10000) + strings.Repeat("</text:span>", 10000)
	var dup bytes.Buffer
	zw := zip.NewWriter(&dup)
	for i := 0; i < 2; i++ {
		w, _ := zw.Create("content.xml")
		w.Write([]byte(flatODF("spreadsheet", "", "", "")))
	}
	zw.Close()
	var noContent bytes.Buffer
	zw = zip.NewWriter(&noContent)
	w, _ := zw.Create("xl/workbook.xml")
	w.Write([]byte("<workbook/>"))
	zw.Close()
	files := map[string][]byte{
		// A million empty rows of a million empty cells: counted, not
		// expanded.
		"empty-repeats.fods": sheet(`<table:table-row table:number-rows-repeated="1000000"><table:table-cell table:number-columns-repeated="1000000"/></table:table-row>` +
			`<table:table-row table:number-rows-repeated="99999999999999999999999"><table:table-cell table:number-columns-repeated="-5"/></table:table-row>`),
		// A non-empty cell repeated a million times on a million rows: the
		// output's bound ends it.
		"full-repeats.fods": sheet(`<table:table-row table:number-rows-repeated="1000000"><table:table-cell table:number-columns-repeated="1000000" office:value-type="string"><text:p>xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx</text:p></table:table-cell></table:table-row>`),
		"beyond-rows.fods":  sheet(`<table:table-row table:number-rows-repeated="1048576"><table:table-cell/></table:table-row><table:table-row>` + one + `</table:table-row>`),
		"beyond-cols.fods":  sheet(`<table:table-row><table:table-cell table:number-columns-repeated="16384"/>` + one + `</table:table-row>`),
		"many-spaces.fods":  sheet(strings.Repeat(`<table:table-row><table:table-cell office:value-type="string"><text:p><text:s text:c="5000000"/></text:p></table:table-cell></table:table-row>`, 1000)),
		"huge-space.fods":   sheet(`<table:table-row><table:table-cell office:value-type="string"><text:p><text:s text:c="2000000000"/></text:p></table:table-cell></table:table-row>`),
		"deep.fods":         sheet(`<table:table-row><table:table-cell><text:p>` + deep + `</text:p></table:table-cell></table:table-row>`),
		"entities.fods": []byte(`<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">` +
			`<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>` +
			string(sheet(`<table:table-row><table:table-cell office:value-type="string"><text:p>&lol3;</text:p></table:table-cell></table:table-row>`))[len(`<?xml version="1.0" encoding="UTF-8"?>`):]),
		"garbage.fods":  []byte("\x89PNG\r\n\x1a\n not a document at all \x00\x01\x02"),
		"empty.fods":    nil,
		"notodf.fods":   []byte(`<?xml version="1.0"?><html><body>hi</body></html>`),
		"unclosed.fods": sheet(`<table:table-row>` + one)[:200],
		"latin1.fods":   []byte(`<?xml version="1.0" encoding="ISO-8859-1"?><office:document/>`),
		"nul.fods":      sheet(`<table:table-row><table:table-cell office:value-type="string"><text:p>a` + "\x00" + `b</text:p></table:table-cell></table:table-row>`),
		"bomb.ods":      zipBomb(t, 64<<20, false),
		"liar.ods":      zipBomb(t, 64<<20, true),
		"dup.ods":       dup.Bytes(),
		"xlsx.ods":      noContent.Bytes(),
		"badzip.ods":    append([]byte("PK\x03\x04"), bytes.Repeat([]byte{0xff}, 100)...),
	}
	for name, data := range files {
		writeFile(t, filepath.Join(dir, name), data, 0o644)
	}
	// A file over the bound, sparse.
	if err := os.WriteFile(filepath.Join(dir, "big.fods"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "big.fods"), CheckMaxDoc+1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo.fods"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sheet.fods", filepath.Join(dir, "link.fods")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sheet.fods"), sheet(`<table:table-row>`+one+`</table:table-row>`), 0o644)
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.fods")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.fods"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		want int
		out  string
	}{
		{"sheet.fods", CheckOK, "S\tA1\t1\t\tfloat\t\n"},
		{"empty-repeats.fods", CheckOK, ""},
		{"full-repeats.fods", CheckTooLarge, ""},
		{"beyond-rows.fods", CheckTooLarge, ""},
		{"beyond-cols.fods", CheckTooLarge, ""},
		{"huge-space.fods", CheckTooLarge, ""},
		{"many-spaces.fods", CheckTooLarge, ""},
		{"deep.fods", CheckTooLarge, ""},
		{"entities.fods", CheckMismatch, ""},
		{"garbage.fods", CheckMismatch, ""},
		{"empty.fods", CheckMismatch, ""},
		{"notodf.fods", CheckMismatch, ""},
		{"unclosed.fods", CheckMismatch, ""},
		{"latin1.fods", CheckMismatch, ""},
		{"nul.fods", CheckMismatch, ""},
		{"bomb.ods", CheckTooLarge, ""},
		{"liar.ods", CheckMismatch, ""},
		{"dup.ods", CheckMismatch, ""},
		{"xlsx.ods", CheckMismatch, ""},
		{"badzip.ods", CheckMismatch, ""},
		{"big.fods", CheckTooLarge, ""},
		{"fifo.fods", CheckMismatch, ""},
		{"link.fods", CheckMismatch, ""},
		{"zero.fods", CheckMismatch, ""},
		{"dir.fods", CheckMismatch, ""},
		{"missing.fods", CheckMissing, ""},
		{"link.fods/x", CheckMismatch, ""},
	} {
		for _, op := range []string{"cells", "paras"} {
			want := c.want
			if op == "paras" && (want == CheckOK || c.file == "full-repeats.fods") {
				// A spreadsheet has no paragraphs (and the repeats are
				// only written out as cells).
				want = CheckMismatch
			}
			t0 := time.Now()
			out, errs, st := runCheck(t, dir, op, filepath.Join(dir, c.file))
			took := time.Since(t0)
			if st != want || st == CheckOK && out != c.out || st != CheckOK && out != "" {
				t.Errorf("%s %s: status %d (%s), output %.200q; want %d, %q", op, c.file, st, strings.TrimSpace(errs), out, want, c.out)
			}
			if took > 3*time.Second {
				t.Errorf("%s %s took %v", op, c.file, took)
			}
		}
	}
	// A relative path is a usage error.
	if _, _, st := runCheck(t, dir, "cells", "sheet.fods"); st != CheckUsage {
		t.Errorf("a relative path: status %d", st)
	}
}

// TestCellsParasPrelude runs sk_cells and sk_paras from a shell verifier,
// as another uid, the way a family's verifier reads a saved document.
func TestCellsParasPrelude(t *testing.T) {
	needRoot(t)
	e := newCheckEnv(t)
	h := e.home
	writeFile(t, h+"/book.fods", []byte(flatODF("spreadsheet", odsStyles, odsAuto, odsBody)), 0o644)
	writeFile(t, h+"/notes.odt", zipODF(t, "text", odtStyles, odtAuto, odtBody), 0o644)
	if err := unix.Mkfifo(h+"/fifo.fodt", 0o666); err != nil {
		t.Fatal(err)
	}
	script := `H="$AGENT_HOME"
for c in 'sk_cells "$H/book.fods" > cells && [ "$(awk -F "\t" '"'"'$1 == "Sales" && $2 == "C2" { print $3 }'"'"' cells)" = -0.1 ]' \
	'sk_cells "$H/book.fods" > cells && grep -q "^Sales	A1	item		string	bold$" cells' \
	'sk_paras "$H/notes.odt" > paras && grep -qx "h	1	bold	Intro" paras' \
	'sk_paras "$H/fifo.fodt"' 'sk_cells "$H/notes.odt"' 'sk_cells "$H/nope.fods"'; do
	eval "$c" >/dev/null 2>&1; echo "$?"
done
`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	work, err := os.MkdirTemp(e.root, "work-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-s")
	cmd.Env = setEnvVar(verifierEnv([]string{"PATH=/usr/bin:/bin", "AGENT_HOME=" + h, "HOME=" + work}), "SK_GUESTD", e.bin)
	cmd.Dir = work
	cmd.Stdin = bytes.NewReader(withVerifierPrelude(script))
	killGroupOnCancel(cmd)
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: otherUID, Gid: otherUID}
	out, err := cmd.Output()
	if ctx.Err() != nil || err != nil {
		t.Fatalf("verifier: %v (%v)", err, ctx.Err())
	}
	want := fmt.Sprint([]int{0, 0, 0, CheckMismatch, CheckMismatch, CheckMissing})
	if got := fmt.Sprint(strings.Fields(string(out))); got != want {
		t.Errorf("statuses %s; want %s", got, want)
	}
}
