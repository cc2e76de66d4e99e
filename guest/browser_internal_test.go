package guest

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/chromedp"
)

// TestDevToolsMessagesBounded: chromedp reads a DevTools message up to its
// zero byte; a writer that never sends one (the agent, through /proc, on
// its own Chromium's pipe) ends the connection at the bound instead of
// growing guestd's memory. Messages under the bound, many in a row, read.
func TestDevToolsMessagesBounded(t *testing.T) {
	msg := `{"id":1,"result":{}}` + "\x00"
	good := strings.Repeat(msg, 1000) + `{"id":2,"result":{"x":"` + strings.Repeat("a", 1000) + `"}}` + "\x00"
	conn := chromedp.NewPipeConn(&boundedMessages{r: io.NopCloser(strings.NewReader(good)), max: 2000}, nopWriter{})
	for i := 0; i < 1001; i++ {
		var m cdproto.Message
		if err := conn.Read(t.Context(), &m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	flood := io.MultiReader(strings.NewReader(msg), bytes.NewReader(bytes.Repeat([]byte("x"), 1<<20)))
	conn = chromedp.NewPipeConn(&boundedMessages{r: io.NopCloser(flood), max: 4096}, nopWriter{})
	var m cdproto.Message
	if err := conn.Read(t.Context(), &m); err != nil {
		t.Fatalf("first message: %v", err)
	}
	if err := conn.Read(t.Context(), &m); !errors.Is(err, errDevToolsMessage) {
		t.Fatalf("a 1 MiB message without its end under a 4 KiB bound: %v; want errDevToolsMessage", err)
	}
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriter) Close() error                { return nil }
