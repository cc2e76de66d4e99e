// The verifier library's PDF op: the text of a PDF the agent exported.

package guest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"
)

// CheckUnavailable: the tool an op needs (pdftotext, for pdftext) is not
// installed where the verifier runs. A verifier exits non-zero on it (no
// verdict) rather than scoring the agent's file as wrong.
const CheckUnavailable = 69

// pdfTextTimeout bounds one pdftotext run; pdfTextMax bounds its output.
const (
	pdfTextTimeout = 10 * time.Second
	pdfTextMax     = 8 << 20
)

// checkPDF writes the text of the PDF at path: a regular file (opened as
// the document ops open one, at most CheckMaxDoc bytes) that starts with
// the PDF header, its bytes handed to pdftotext on its standard input (the
// tool never opens an agent's path), in reading order, pages one after
// another. A file that is not a PDF, or that pdftotext cannot read, is
// CheckMismatch.
func checkPDF(path, anchor string, w io.Writer) error {
	data, err := readDocAt(path, anchor)
	if err != nil {
		return err
	}
	// A PDF starts with its header (readers accept it within the first
	// KiB; LibreOffice writes it first).
	if i := bytes.Index(data[:min(len(data), 1024)], []byte("%PDF-")); i < 0 {
		return failf(CheckMismatch, "not a PDF (no %%PDF- header)")
	}
	text, err := pdfText(data)
	if err != nil {
		return err
	}
	_, err = w.Write(text)
	return err
}

// pdfText runs pdftotext on data, bounded in time and output; NUL bytes
// are dropped so that the text survives a shell.
func pdfText(data []byte) ([]byte, error) {
	tool, err := exec.LookPath("pdftotext")
	if err != nil {
		tool = "/usr/bin/pdftotext"
		if unix.Access(tool, unix.X_OK) != nil {
			return nil, failf(CheckUnavailable, "pdftotext is not installed (poppler-utils)")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), pdfTextTimeout)
	defer cancel()
	var out, errb limitedBuffer
	out.max, errb.max = pdfTextMax, 4096
	cmd := exec.CommandContext(ctx, tool, "-q", "-enc", "UTF-8", "-nopgbrk", "fd://0", "-")
	cmd.Stdin = bytes.NewReader(data)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"}
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	switch {
	case out.over:
		return nil, failf(CheckTooLarge, "over the %d bytes of text a check writes", pdfTextMax)
	case ctx.Err() != nil:
		return nil, failf(CheckMismatch, "pdftotext ran past %v", pdfTextTimeout)
	case err != nil:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, failf(CheckMismatch, "not a PDF pdftotext reads (%v)", err)
		}
		return nil, failf(CheckUnavailable, "pdftotext: %v", err)
	}
	return bytes.ReplaceAll(out.b.Bytes(), []byte{0}, nil), nil
}

// limitedBuffer keeps at most max bytes and notes whether more came.
type limitedBuffer struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); len(p) > room {
		l.over = true
		l.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return l.b.Write(p)
}
