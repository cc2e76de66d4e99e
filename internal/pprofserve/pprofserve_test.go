package pprofserve

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestServeLoopbackOnly(t *testing.T) {
	if _, err := Serve("0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("0.0.0.0: got %v; want a loopback error", err)
	}
	addr, err := Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusOK || !strings.Contains(string(b), "goroutine") {
		t.Errorf("index: status %d, %.100q", r.StatusCode, b)
	}
}
