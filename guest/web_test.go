package guest_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/guest/wire"
)

// webGet requests path of app host through the web host at addr.
func webDo(t *testing.T, addr, host, method, path string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, "http://"+addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	cl := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestWebHostServesAppsAndHandsStateToVerifier serves the shop, changes
// its state over HTTP as a browser would, and finds the change in the
// state the verifier reads; a flood of idle connections neither blocks
// the verdict nor, once gone, the site.
func TestWebHostServesAppsAndHandsStateToVerifier(t *testing.T) {
	d := startDesk(t, 320, 240, "")
	data, err := os.ReadFile("webapp/testdata/shop.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := d.cl.Web(ctx, wire.WebArgs{App: "nosuch"}); err == nil {
		t.Fatal("an unknown app was served")
	}
	if _, err := d.cl.Web(ctx, wire.WebArgs{App: "shop", Data: []byte("{not json")}); err == nil {
		t.Fatal("bad data was served")
	}
	res, err := d.cl.Web(ctx, wire.WebArgs{App: "shop", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.URL, "http://shop.test") {
		t.Fatalf("url %q", res.URL)
	}
	if code, body := webDo(t, res.Addr, "shop.test", "GET", "/", nil); code != 200 || !strings.Contains(body, "Northwind") {
		t.Fatalf("GET /: %d %.200s", code, body)
	}
	if code, _ := webDo(t, res.Addr, "mail.test", "GET", "/", nil); code != http.StatusNotFound {
		t.Fatalf("an app not served answered %d", code)
	}
	if code, _ := webDo(t, res.Addr, "shop.test", "POST", "/cart/add", url.Values{"sku": {"KIT-1001"}, "qty": {"2"}}); code != http.StatusSeeOther {
		t.Fatalf("add to cart: %d", code)
	}

	// 200 idle connections: the host serves at most 64 at once and
	// queues the rest; the verdict does not go through HTTP at all.
	var conns []net.Conn
	for i := 0; i < 200; i++ {
		c, err := net.Dial("tcp", res.Addr)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	sr, err := d.cl.Score(ctx, wire.ScoreArgs{Shell: `cat "$SK_WEB/shop.json"`, TimeoutMS: 10000})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		c.Close()
	}
	var st struct {
		Cart []struct {
			SKU string `json:"sku"`
			Qty int    `json:"qty"`
		} `json:"cart"`
	}
	if err := json.Unmarshal(sr.Stdout, &st); err != nil {
		t.Fatalf("verifier's state: %v: %.300s %s", err, sr.Stdout, sr.Stderr)
	}
	if len(st.Cart) != 1 || st.Cart[0].SKU != "KIT-1001" || st.Cart[0].Qty != 2 {
		t.Fatalf("cart in the verifier's state: %+v", st.Cart)
	}
	if code, _ := webDo(t, res.Addr, "shop.test", "GET", "/cart", nil); code != 200 {
		t.Fatalf("after the flood: %d", code)
	}
}
