package guest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// minimalPDF is a one-page PDF showing lines in Helvetica, with a correct
// cross-reference table.
func minimalPDF(lines ...string) []byte {
	var content strings.Builder
	content.WriteString("BT /F1 12 Tf 72 720 Td 14 TL\n")
	for _, l := range lines {
		fmt.Fprintf(&content, "(%s) Tj T*\n", l)
	}
	content.WriteString("ET\n")
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%sendstream", content.Len(), content.String()),
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

func TestCheckPDFText(t *testing.T) {
	if _, err := exec.LookPath("pdftotext"); err != nil {
		t.Skip("pdftotext (poppler-utils) is not installed")
	}
	home := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(home, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("report.pdf", minimalPDF("Quarterly figures are up", "Second line here"))
	check := func(path string) (int, string) {
		var out, errb bytes.Buffer
		st := Check([]string{"pdftext", path}, home, &out, &errb)
		return st, out.String()
	}
	st, out := check(good)
	if st != CheckOK || !strings.Contains(out, "Quarterly figures are up") || !strings.Contains(out, "Second line here") {
		t.Fatalf("a real PDF: status %d, text %q", st, out)
	}
	// Not a PDF: text named .pdf, a header with nothing readable after it.
	for name, data := range map[string][]byte{
		"text.pdf":  []byte("Quarterly figures are up\n"),
		"empty.pdf": nil,
		"liar.pdf":  []byte("%PDF-1.4\nQuarterly figures are up\n"),
	} {
		if st, out := check(write(name, data)); st != CheckMismatch || strings.Contains(out, "Quarterly") {
			t.Errorf("%s: status %d, text %q; want %d and no text", name, st, out, CheckMismatch)
		}
	}
	// What the agent may plant instead: a link to the real PDF, a FIFO, a
	// directory; none is followed or read.
	if err := os.Symlink(good, filepath.Join(home, "link.pdf")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(home, "fifo.pdf"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(home, "dir.pdf"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"link.pdf", "fifo.pdf", "dir.pdf"} {
		if st, _ := check(filepath.Join(home, name)); st != CheckMismatch {
			t.Errorf("%s: status %d, want %d", name, st, CheckMismatch)
		}
	}
	if st, _ := check(filepath.Join(home, "missing.pdf")); st != CheckMissing {
		t.Errorf("missing: status %d, want %d", st, CheckMissing)
	}
	// The verifier library has the op.
	if !strings.Contains(verifierPrelude, `sk_pdftext() { "$SK_GUESTD" check pdftext "$@"; }`) {
		t.Error("the verifier library has no sk_pdftext")
	}
}
