package configs

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// wellFormed fails the test unless doc is well-formed XML.
func wellFormed(t *testing.T, doc string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
	}
}

var odfTable = &Table{
	Header: []string{"item", "qty", "price", "rate", "when", "note"},
	Rows: [][]string{
		{"apple", "3", "1.50", "12.5", "2024-05-01", "a  b"},
		{"pear <&>", "10", "1234.5", "7", "2023-12-31", " lead"},
		{"007", "-2", "0.99", "100", "2020-02-29", "x\ny"},
		{"total", "=SUM(B2:B4)", "=SUM(C2:C4)", `=IF(B2>2,"big","small")`, "", "$4.50"},
	},
}

func TestFodsTypedCells(t *testing.T) {
	doc, err := fodsDoc(odfTable, "sheet=Sales", "price=currency", "rate=percent", "A=text,bold",
		[][]string{{"12%", "-$3.25", "x", "0.5"}}, "sheet=Other")
	if err != nil {
		t.Fatal(err)
	}
	wellFormed(t, doc)
	for _, want := range []string{
		`<table:table table:name="Sales">`,
		`<table:table table:name="Other">`,
		// The header is bold text.
		`office:value-type="string"><text:p>qty</text:p>`,
		`office:value-type="float" office:value="3"><text:p>3</text:p>`,
		`office:value-type="float" office:value="-2"><text:p>-2</text:p>`,
		`office:value-type="currency" office:currency="USD" office:value="1234.5"><text:p>$1,234.50</text:p>`,
		`office:value-type="percentage" office:value="0.125"><text:p>12.5%</text:p>`,
		`office:value-type="percentage" office:value="1"><text:p>100%</text:p>`,
		`office:value-type="date" office:date-value="2024-05-01"><text:p>2024-05-01</text:p>`,
		// A leading zero keeps a code as text; spaces survive.
		`office:value-type="string"><text:p>007</text:p>`,
		`<text:p>a <text:s/>b</text:p>`,
		`<text:p><text:s/>lead</text:p>`,
		`<text:p>x</text:p><text:p>y</text:p>`,
		`<text:p>pear &lt;&amp;&gt;</text:p>`,
		`table:formula="of:=SUM([.B2:.B4])"/>`,
		`table:formula="of:=IF([.B2]&gt;2;&quot;big&quot;;&quot;small&quot;)"/>`,
		`office:value-type="currency" office:currency="USD" office:value="4.50"><text:p>$4.50</text:p>`,
		// The second sheet's auto cells.
		`office:value-type="percentage" office:value="0.12"><text:p>12%</text:p>`,
		`office:value-type="currency" office:currency="USD" office:value="-3.25"><text:p>-$3.25</text:p>`,
		`office:value-type="float" office:value="0.5"><text:p>0.5</text:p>`,
		`<number:currency-symbol>$</number:currency-symbol>`,
		`fo:font-weight="bold"`,
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("fods lacks %s", want)
		}
	}
	// A decimal keeps its decimals through a number style.
	if !strings.Contains(doc, `<number:number-style style:name="`) || !strings.Contains(doc, `number:decimal-places="2"`) {
		t.Error("no number style for 1.50's two decimals")
	}
	// header=no drops the header; a column is addressed by letter.
	doc, err = fodsDoc(odfTable, "header=no", "B=text")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(doc, "<text:p>item</text:p>") || !strings.Contains(doc, `office:value-type="string"><text:p>3</text:p>`) {
		t.Errorf("header=no or B=text not applied:\n%s", doc)
	}
	// Tab-separated lines are rows too.
	doc, err = fodsDoc([]string{"a\t1", "b\t2.5"})
	if err != nil {
		t.Fatal(err)
	}
	wellFormed(t, doc)
	if !strings.Contains(doc, `table:name="Sheet1"`) || !strings.Contains(doc, `office:value="2.5"`) {
		t.Errorf("tab-separated lines:\n%s", doc)
	}
}

func TestFodsErrors(t *testing.T) {
	big := &Table{Header: []string{"a"}}
	for i := 0; i <= maxODFCells; i++ {
		big.Rows = append(big.Rows, []string{"x"})
	}
	for _, c := range []struct {
		name string
		args []any
	}{
		{"no table", nil},
		{"option first", []any{"sheet=A", odfTable}},
		{"unknown option", []any{odfTable, "bogus"}},
		{"unknown column", []any{odfTable, "nope=text"}},
		{"unknown format", []any{odfTable, "qty=money"}},
		{"unknown currency", []any{odfTable, "qty=currency:XYZ"}},
		{"not a decimal", []any{odfTable, "item=number"}},
		{"not a date", []any{odfTable, "qty=date"}},
		{"bad sheet name", []any{odfTable, "sheet=a/b"}},
		{"same sheet twice", []any{odfTable, "sheet=A", odfTable, "sheet=a"}},
		{"tab in a cell", []any{[][]string{{"a\tb"}}}},
		{"control character", []any{[][]string{{"a\x01b"}}}},
		{"unclosed string", []any{[][]string{{`="abc`}}}},
		{"not a table", []any{42}},
		{"too many cells", []any{big}},
	} {
		if _, err := fodsDoc(c.args...); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

func TestODFOpenFormula(t *testing.T) {
	for in, want := range map[string]string{
		"=SUM(B2:B5)":             "of:=SUM([.B2:.B5])",
		"=B2*C2+$D$1":             "of:=[.B2]*[.C2]+[.$D$1]",
		"=sum(b2:b5)":             "of:=sum([.B2:.B5])",
		"=ROUND(A1,2)":            "of:=ROUND([.A1];2)",
		"=LOG10(A1)":              "of:=LOG10([.A1])",
		`=IF(A1>1,"A1, B2","x")`:  `of:=IF([.A1]>1;"A1, B2";"x")`,
		`="say ""A1"""`:           `of:="say ""A1"""`,
		"=AVERAGE(A1:A3;B1)":      "of:=AVERAGE([.A1:.A3];[.B1])",
		"=1.5*2":                  "of:=1.5*2",
		"=COUNTIF(A1:A9, \">3\")": `of:=COUNTIF([.A1:.A9]; ">3")`,
	} {
		got, err := openFormula(in)
		if err != nil || got != want {
			t.Errorf("openFormula(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestFodtParagraphs(t *testing.T) {
	doc, err := fodtDoc("# Report *draft*", []string{"plain **bold** and *it* here", "## Part two", "  two  spaces ", "### Three", "odd * star", "a **b"})
	if err != nil {
		t.Fatal(err)
	}
	wellFormed(t, doc)
	for _, want := range []string{
		`<text:h text:style-name="Heading_20_1" text:outline-level="1">Report <text:span text:style-name="T2">draft</text:span></text:h>`,
		`<text:p text:style-name="Standard">plain <text:span text:style-name="T1">bold</text:span> and <text:span text:style-name="T2">it</text:span> here</text:p>`,
		`<text:h text:style-name="Heading_20_2" text:outline-level="2">Part two</text:h>`,
		`<text:p text:style-name="Standard"><text:s text:c="2"/>two <text:s/>spaces<text:s/></text:p>`,
		`<text:h text:style-name="Heading_20_3" text:outline-level="3">Three</text:h>`,
		`<text:p text:style-name="Standard">odd * star</text:p>`,
		`<text:p text:style-name="Standard">a **b</text:p>`,
		`style:name="Heading_20_1"`,
		`office:mimetype="application/vnd.oasis.opendocument.text"`,
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("fodt lacks %s", want)
		}
	}
	if _, err := fodtDoc("bad \x02 char"); err == nil {
		t.Error("a control character: no error")
	}
	if _, err := fodtDoc(map[string]string{}); err == nil {
		t.Error("a map: no error")
	}
}

// odfFamily uses both functions the way a family does.
const odfFamily = `{
  "id": "odf-kind", "version": 1, "max_steps": 2,
  "instruction": "Fix ~/stock.fods and ~/notes.fodt.",
  "params": [
    {"name": "tb", "table": {"rows": [3, 6], "columns": [{"name": "item", "word": "products", "unique": true}, {"name": "qty", "int": {"min": 1, "max": 40}}, {"name": "price", "number": {"min": 1, "max": 50, "decimals": 2}}]}},
    {"name": "title", "word": "words"},
    {"name": "body", "text": {"lines": [2, 4], "words": [3, 8]}}
  ],
  "instance": [
    {"put_file": {"path": "~/stock.fods", "text": "{{fods .tb ` + "`sheet=Stock` `price=currency`" + `}}"}},
    {"put_file": {"path": "~/notes.fodt", "text": "{{fodt (printf \"# %s\" .title) .body}}"}}
  ],
  "expect": {"n": "{{len .tb.Rows}}"},
  "verifier": {"shell": "echo 0"},
  "solution": [[{"verb": "done"}]]
}`

func TestODFInAFamily(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "odf-kind.json"), []byte(odfFamily), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := LoadTasks(dir)
	if err != nil {
		t.Fatal(err)
	}
	in, err := ts["odf-kind"].Instantiate(SplitTrain, 3)
	if err != nil {
		t.Fatal(err)
	}
	fods, fodt := in.InstanceSetup[0].PutFile.Text, in.InstanceSetup[1].PutFile.Text
	wellFormed(t, fods)
	wellFormed(t, fodt)
	tb := in.Params["tb"].(*Table)
	if !strings.Contains(fods, `table:name="Stock"`) || !strings.Contains(fods, `office:value="`+tb.Rows[0][2]+`"`) {
		t.Errorf("fods of %v:\n%s", tb, fods)
	}
	if !strings.Contains(fodt, `outline-level="1">`+in.Params["title"].(string)+`</text:h>`) {
		t.Errorf("fodt:\n%s", fodt)
	}
}

// TestODFLibreOffice converts a generated spreadsheet (both sheets) to CSV
// and a generated text document to plain text with LibreOffice, and
// compares what it read: the documents are LibreOffice's to open.
func TestODFLibreOffice(t *testing.T) {
	soffice, err := exec.LookPath("soffice")
	if err != nil || testing.Short() {
		t.Skip("needs LibreOffice (soffice)")
	}
	dir := t.TempDir()
	fods, err := fodsDoc(odfTable, "sheet=Sales", "price=currency", "rate=percent",
		[][]string{{"12%", "-$3.25", "Grüße", "0.5", "=A1*2"}}, "sheet=Other")
	if err != nil {
		t.Fatal(err)
	}
	fodt, err := fodtDoc("# Report *draft*", "plain **bold** and *it* here", "## Part two", "  two  spaces", "odd * star")
	if err != nil {
		t.Fatal(err)
	}
	writeDoc := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	convert := func(filter, path string) {
		t.Helper()
		cmd := exec.Command(soffice, "-env:UserInstallation=file://"+dir+"/profile", "--headless",
			"--convert-to", filter, "--outdir", dir, path)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("soffice --convert-to %s: %v\n%s", filter, time.Since(t0), out)
		if err != nil {
			t.Fatalf("soffice: %v", err)
		}
	}
	// Separator ',', quote '"', UTF-8, cells as shown, every sheet to a file
	// of its own.
	convert("csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,true,false,false,-1", writeDoc("book.fods", fods))
	convert("txt:Text", writeDoc("notes.fodt", fodt))
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")))
	}
	for name, want := range map[string]string{
		"book-Sales.csv": "item,qty,price,rate,when,note\n" +
			"apple,3,$1.50,12.5%,2024-05-01,a  b\n" +
			"pear <&>,10,\"$1,234.50\",7%,2023-12-31, lead\n" +
			"007,-2,$0.99,100%,2020-02-29,\"x\ny\"\n" +
			"total,11,\"$1,236.99\",big,,$4.50\n",
		"book-Other.csv": "12%,-$3.25,Grüße,0.5,0.24\n",
		"notes.txt":      "Report draft\nplain bold and it here\nPart two\n  two  spaces\nodd * star\n",
	} {
		if got := strings.ReplaceAll(read(name), "\r\n", "\n"); strings.TrimSuffix(got, "\n") != strings.TrimSuffix(want, "\n") {
			t.Errorf("%s:\n%q\nwant\n%q", name, got, want)
		}
	}
}
