package webapp

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

func shopStateOf(t *testing.T, a App) shopState {
	t.Helper()
	var st shopState
	appState(t, a, &st)
	return st
}

func shopStock(st shopState, sku string) int {
	for _, p := range st.Products {
		if p.SKU == sku {
			return p.Stock
		}
	}
	return -1
}

func TestShopPages(t *testing.T) {
	a, _ := loadApp(t, "shop")
	for path, want := range map[string][]string{
		"/":                                {"Northwind Market", "Shop by category", "Stainless Steel Water Bottle", `href="/category/Kitchen"`},
		"/search?q=bottle":                 {"Results for “bottle”", "Stainless Steel Water Bottle", "Showing 1–1 of 1 product"},
		"/search?q=water+bottle&sort=name": {"Stainless Steel Water Bottle"},
		"/search":                          {"All products", "Showing 1–12 of 27 products", `href="/search?page=2"`, `href="/search?page=3"`},
		"/search?page=3":                   {"Showing 25–27 of 27"},
		"/search?category=office&sort=price-desc": {"Ergonomic Mesh Office Chair", "Showing 1–6 of 6"},
		"/search?max=20&instock=1":                {"Gel Pens", "A5 Dotted Notebook"},
		"/search?max=abc":                         {"Enter a price like 25 or 25.00."},
		"/category/Outdoors":                      {"Two-Person Dome Tent", "Showing 1–5 of 5", `<span aria-current="page">Outdoors</span>`},
		"/product/KIT-1001":                       {"Stainless Steel Water Bottle", "$18.99", "In stock (24 available)", `name="qty"`, "autofocus", `action="/cart/add"`, "More in Kitchen"},
		"/product/KIT-1001?qty=7":                 {`value="7"`},
		"/product/KIT-1004":                       {"Out of stock"},
		"/cart":                                   {"Your cart is empty."},
		"/checkout":                               {"Your cart is empty"},
		"/orders":                                 {"You haven’t placed any orders yet."},
	} {
		page := kitGet(t, a, path, 200)
		kitOffline(t, path, page)
		for _, w := range want {
			if !strings.Contains(page, w) {
				t.Errorf("GET %s: no %q in\n%s", path, w, kitText1(page))
			}
		}
	}
	for _, path := range []string{"/product/NOPE", "/category/Nope", "/order/NM-1", "/nothing", "/product/%3Cscript%3E"} {
		page := kitGet(t, a, path, 404)
		if strings.Contains(page, "<script") {
			t.Errorf("%s reflects markup", path)
		}
	}
	// The search box reflects the query escaped.
	page := kitGet(t, a, "/search?q=%3Cb%3Ex%22", 200)
	if strings.Contains(page, "<b>x") || !strings.Contains(page, "&lt;b&gt;x") {
		t.Errorf("query not escaped:\n%s", page)
	}
	// The price filter excludes dearer items; in-stock excludes stock 0.
	page = kitGet(t, a, "/search?max=20&instock=1", 200)
	for _, no := range []string{"Cast Iron Skillet", "Smart Plug", "Ergonomic"} {
		if strings.Contains(page, no) {
			t.Errorf("filtered listing shows %s", no)
		}
	}
}

func TestShopFlow(t *testing.T) {
	a, _ := loadApp(t, "shop")
	if loc := kitPost(t, a, "/cart/add", url.Values{"sku": {"KIT-1001"}, "qty": {"2"}}); loc != "/cart?msg=added&sku=KIT-1001" {
		t.Fatalf("add redirects to %q", loc)
	}
	page := kitGet(t, a, "/cart?msg=added&sku=KIT-1001", 200)
	for _, w := range []string{"Added “Stainless Steel Water Bottle” to your cart.", "$37.98", "autofocus"} {
		if !strings.Contains(page, w) {
			t.Errorf("cart: no %q", w)
		}
	}
	kitPost(t, a, "/cart/add", url.Values{"sku": {"OFF-2003"}, "qty": {" 1 "}})
	kitPost(t, a, "/cart/add", url.Values{"sku": {"OFF-2003"}, "qty": {"2"}}) // 3 in all
	kitPost(t, a, "/cart/add", url.Values{"sku": {"ELE-5002"}, "qty": {"1"}})
	kitPost(t, a, "/cart/update", url.Values{"sku": {"ELE-5002"}, "qty": {"5"}})
	kitPost(t, a, "/cart/add", url.Values{"sku": {"HOM-4002"}, "qty": {"1"}})
	kitPost(t, a, "/cart/remove", url.Values{"sku": {"ELE-5002"}})
	kitPost(t, a, "/cart/update", url.Values{"sku": {"HOM-4002"}, "qty": {"0"}}) // 0 removes
	st := shopStateOf(t, a)
	if fmt.Sprint(st.Cart) != "[{KIT-1001 Stainless Steel Water Bottle 2 1899} {OFF-2003 A5 Dotted Notebook 3 1250}]" {
		t.Fatalf("cart %v", st.Cart)
	}
	if st.CartSubtotalCents != 7548 {
		t.Fatalf("cart subtotal %d", st.CartSubtotalCents)
	}
	// The cart page focuses the line named by ?edit=.
	page = kitGet(t, a, "/cart?edit=OFF-2003", 200)
	if !strings.Contains(page, `id="qty-OFF-2003" name="qty" class="qty" value="3" inputmode="numeric" autocomplete="off" autofocus`) {
		t.Errorf("edit line not focused:\n%s", page)
	}
	if n := strings.Count(page, "autofocus"); n != 1 {
		t.Errorf("cart has %d autofocus", n)
	}
	page = kitGet(t, a, "/checkout?coupon=spring10&shipping=express&city=Portland", 200)
	for _, w := range []string{`value="Ada Park"`, `value="ada.park@example.com"`, `value="Portland"`, `value="express" checked`, "Coupon SPRING10 (−10%)", "−$7.55", "$80.92"} {
		if !strings.Contains(page, w) {
			t.Errorf("checkout: no %q", w)
		}
	}
	loc := kitPost(t, a, "/checkout", url.Values{
		"name": {"Ada Park"}, "email": {"ada.park@example.com"}, "address": {"12 Elm Street"},
		"city": {"Portland"}, "postcode": {"97201"}, "shipping": {"express"}, "coupon": {" spring10 "},
	})
	st = shopStateOf(t, a)
	if len(st.Orders) != 1 || len(st.Cart) != 0 {
		t.Fatalf("orders %v cart %v", st.Orders, st.Cart)
	}
	o := st.Orders[0]
	// 2 × 18.99 + 3 × 12.50 = 75.48; 10% = 7.548 → 7.55; + 12.99 express.
	if o.SubtotalCents != 7548 || o.DiscountCents != 755 || o.ShippingCents != 1299 || o.TotalCents != 8092 {
		t.Fatalf("totals %+v", o)
	}
	if o.Coupon != "SPRING10" || o.Shipping != "express" || o.Name != "Ada Park" || o.Postcode != "97201" || len(o.Lines) != 2 || o.Lines[1] != (shopLine{"OFF-2003", "A5 Dotted Notebook", 3, 1250}) {
		t.Fatalf("order %+v", o)
	}
	if loc != "/order/"+o.Number+"?msg=placed" || !strings.HasPrefix(o.Number, "NM-") {
		t.Fatalf("checkout redirects to %q (order %s)", loc, o.Number)
	}
	if shopStock(st, "KIT-1001") != 22 || shopStock(st, "OFF-2003") != 57 {
		t.Fatalf("stock not taken: %v", st.Products[:1])
	}
	page = kitGet(t, a, loc, 200)
	for _, w := range []string{"Your order has been placed", o.Number, "$80.92", "12 Elm Street"} {
		if !strings.Contains(page, w) {
			t.Errorf("confirmation: no %q", w)
		}
	}
	if page := kitGet(t, a, "/orders", 200); !strings.Contains(page, o.Number) || !strings.Contains(page, "$80.92") {
		t.Errorf("history lacks the order")
	}
	var acts []string
	for _, e := range st.Log {
		acts = append(acts, e.Action)
	}
	if strings.Join(acts, " ") != "add_to_cart add_to_cart add_to_cart add_to_cart update_cart add_to_cart remove_from_cart remove_from_cart place_order" {
		t.Fatalf("log %v", acts)
	}
	last := st.Log[len(st.Log)-1].Fields
	if last["total_cents"] != "8092" || last["coupon"] != "SPRING10" || last["lines"] != "KIT-1001x2,OFF-2003x3" {
		t.Fatalf("order event %v", last)
	}
	// A second order, no coupon, 100% coupon edge: WELCOME25 on 1 × 16.50 = 4.125 → 4.13.
	kitPost(t, a, "/cart/add", url.Values{"sku": {"HOM-4002"}, "qty": {"1"}})
	kitPost(t, a, "/checkout", url.Values{"name": {"B"}, "email": {"b@c.io"}, "address": {"1 A St"}, "city": {"X"}, "postcode": {"AB1 2CD"}, "shipping": {"pickup"}, "coupon": {"WELCOME25"}})
	st = shopStateOf(t, a)
	o2 := st.Orders[1]
	if o2.DiscountCents != 413 || o2.TotalCents != 1650-413 || o2.ShippingCents != 0 || o2.Number == o.Number {
		t.Fatalf("second order %+v", o2)
	}
	roundTrip(t, "shop", testdata(t, "shop"), a)
}

func TestShopValidation(t *testing.T) {
	a, _ := loadApp(t, "shop")
	kitPost(t, a, "/cart/add", url.Values{"sku": {"OFF-2002"}, "qty": {"2"}}) // stock 3
	before := appState(t, a, nil)
	for _, c := range []struct {
		path string
		f    url.Values
		code int
		want string
	}{
		{"/cart/add", url.Values{"sku": {"KIT-1001"}, "qty": {"0"}}, 422, "Enter a quantity from 1 to 99."},
		{"/cart/add", url.Values{"sku": {"KIT-1001"}, "qty": {"100"}}, 422, "Enter a quantity from 1 to 99."},
		{"/cart/add", url.Values{"sku": {"KIT-1001"}, "qty": {"two"}}, 422, "Enter a quantity from 1 to 99."},
		{"/cart/add", url.Values{"sku": {"KIT-1001"}, "qty": {"-1"}}, 422, "Enter a quantity"},
		{"/cart/add", url.Values{"sku": {"KIT-1001"}}, 422, "Enter a quantity"},
		{"/cart/add", url.Values{"sku": {"KIT-1001"}, "qty": {"25"}}, 422, "Only 24 in stock."},
		{"/cart/add", url.Values{"sku": {"OFF-2002"}, "qty": {"2"}}, 422, "Only 3 in stock, and you already have 2 in your cart."},
		{"/cart/add", url.Values{"sku": {"KIT-1004"}, "qty": {"1"}}, 422, "Sorry, this item is out of stock."},
		{"/cart/add", url.Values{"sku": {"NOPE"}, "qty": {"1"}}, 404, "Product not found"},
		{"/cart/update", url.Values{"sku": {"OFF-2002"}, "qty": {"4"}}, 422, "Only 3 in stock."},
		{"/cart/update", url.Values{"sku": {"OFF-2002"}, "qty": {"x"}}, 422, "Enter a quantity from 0 to 99."},
		{"/cart/update", url.Values{"sku": {"KIT-1001"}, "qty": {"1"}}, 404, "not in your cart"},
		{"/cart/remove", url.Values{"sku": {"KIT-1001"}}, 404, "not in your cart"},
		{"/checkout", url.Values{"email": {"ada@example.com"}, "address": {"1 A St"}, "city": {"X"}, "postcode": {"12345"}, "shipping": {"standard"}}, 422, "Enter your full name."},
		{"/checkout", url.Values{"name": {"A"}, "email": {"not-an-email"}, "address": {"1 A St"}, "city": {"X"}, "postcode": {"12345"}, "shipping": {"standard"}}, 422, "Enter an email address like name@example.com."},
		{"/checkout", url.Values{"name": {"A"}, "email": {"a@b.co"}, "address": {""}, "city": {"X"}, "postcode": {"12345"}, "shipping": {"standard"}}, 422, "Enter your street address."},
		{"/checkout", url.Values{"name": {"A"}, "email": {"a@b.co"}, "address": {"1 A St"}, "city": {""}, "postcode": {"12345"}, "shipping": {"standard"}}, 422, "Enter your city."},
		{"/checkout", url.Values{"name": {"A"}, "email": {"a@b.co"}, "address": {"1 A St"}, "city": {"X"}, "postcode": {"1"}, "shipping": {"standard"}}, 422, "at least 3 characters"},
		{"/checkout", url.Values{"name": {"A"}, "email": {"a@b.co"}, "address": {"1 A St"}, "city": {"X"}, "postcode": {"12<45"}, "shipping": {"standard"}}, 422, "only letters, digits"},
		{"/checkout", url.Values{"name": {"A"}, "email": {"a@b.co"}, "address": {"1 A St"}, "city": {"X"}, "postcode": {"12345"}, "shipping": {"teleport"}}, 422, "Choose one of the shipping methods."},
		{"/checkout", url.Values{"name": {"A"}, "email": {"a@b.co"}, "address": {"1 A St"}, "city": {"X"}, "postcode": {"12345"}}, 422, "Choose a shipping method."},
		{"/checkout", url.Values{"name": {"A"}, "email": {"a@b.co"}, "address": {"1 A St"}, "city": {"X"}, "postcode": {"12345"}, "shipping": {"standard"}, "coupon": {"FREE100"}}, 422, "“FREE100” is not a valid coupon code."},
		{"/checkout", url.Values{"name": {strings.Repeat("n", 101)}, "email": {"a@b.co"}, "address": {"1 A St"}, "city": {"X"}, "postcode": {"12345"}, "shipping": {"standard"}}, 422, "This is too long"},
		{"/checkout", url.Values{"name": {"A\x00B"}, "email": {"a@b.co"}, "address": {"1 A St"}, "city": {"X"}, "postcode": {"12345"}, "shipping": {"standard"}}, 422, "characters we can’t accept"},
	} {
		w := kitDo(a, "POST", c.path, c.f)
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("POST %s %v: %d, want %d with %q\n%s", c.path, c.f, w.Code, c.code, c.want, kitText1(w.Body.String()))
		}
	}
	if after := appState(t, a, nil); string(after) != string(before) {
		t.Fatalf("validation errors changed the state")
	}
	// The re-rendered checkout keeps what was typed and focuses the name.
	w := kitDo(a, "POST", "/checkout", url.Values{"name": {"Zed <Q>"}, "email": {"bad"}, "city": {"Oslo"}, "shipping": {"express"}})
	for _, want := range []string{`value="Zed &lt;Q&gt;"`, `value="Oslo"`, `value="express" checked`, "Please correct the 3 fields", `autocomplete="email" autofocus`} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("re-rendered checkout: no %q", want)
		}
	}
	// An empty cart cannot check out.
	b, _ := loadApp(t, "shop")
	w = kitDo(b, "POST", "/checkout", url.Values{"name": {"A"}, "email": {"a@b.co"}, "address": {"1 A St"}, "city": {"X"}, "postcode": {"12345"}, "shipping": {"standard"}})
	if w.Code != 422 || len(shopStateOf(t, b).Orders) != 0 {
		t.Fatalf("empty cart checkout: %d", w.Code)
	}
	// 99 is the most of one item; 100 lines the most items.
	c, err := New("shop", []byte(`{"products":[{"sku":"A","price_cents":1,"stock":500}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	kitPost(t, c, "/cart/add", url.Values{"sku": {"A"}, "qty": {"99"}})
	if w := kitDo(c, "POST", "/cart/add", url.Values{"sku": {"A"}, "qty": {"1"}}); w.Code != 422 || !strings.Contains(w.Body.String(), "at most 99") {
		t.Fatalf("100th of an item: %d", w.Code)
	}
	var ps []string
	for i := range 101 {
		ps = append(ps, fmt.Sprintf(`{"sku":"S%d","price_cents":100,"stock":5}`, i))
	}
	d, err := New("shop", []byte(`{"products":[`+strings.Join(ps, ",")+`]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		kitPost(t, d, "/cart/add", url.Values{"sku": {fmt.Sprintf("S%d", i)}, "qty": {"1"}})
	}
	if w := kitDo(d, "POST", "/cart/add", url.Values{"sku": {"S100"}, "qty": {"1"}}); w.Code != 422 || !strings.Contains(w.Body.String(), "Your cart is full") {
		t.Fatalf("101st line: %d", w.Code)
	}
}

func TestShopData(t *testing.T) {
	for _, bad := range []string{
		`{"products":[{"sku":"A","price_cents":1},{"sku":"A","price_cents":2}]}`,
		`{"products":[{"sku":"a b","price_cents":1}]}`,
		`{"products":[{"sku":"","price_cents":1}]}`,
		`{"products":[{"sku":"A","price_cents":-1}]}`,
		`{"products":[{"sku":"A","price_cents":12.5}]}`,
		`{"products":[{"sku":"A","price_cents":1,"stock":-2}]}`,
		`{"coupons":[{"code":"X","percent_off":0}]}`,
		`{"coupons":[{"code":"X","percent_off":10},{"code":"x","percent_off":5}]}`,
		`{"shipping":[{"id":"a","price_cents":1},{"id":"a","price_cents":2}]}`,
		`{"products":{}}`,
	} {
		if _, err := New("shop", []byte(bad), nil); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	// Lenient: empty data is an empty store with default shipping.
	a, err := New("shop", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	kitGet(t, a, "/", 200)
	kitGet(t, a, "/search", 200)
	if _, err := New("shop", []byte(`{}`), []byte(`{"cart":[{"sku":"GONE","qty":1}]}`)); err == nil {
		t.Error("resumed a cart of an unknown product")
	}
	if _, err := New("shop", []byte(`{}`), []byte(`not json`)); err == nil {
		t.Error("resumed garbage")
	}
}

func TestShopHostile(t *testing.T) {
	a, _ := loadApp(t, "shop")
	kitPost(t, a, "/cart/add", url.Values{"sku": {"KIT-1001"}, "qty": {"1"}})
	garbage := []url.Values{
		{},
		{"sku": {"KIT-1002"}, "qty": {"NaN"}},
		{"sku": {"KIT-1002"}, "qty": {"1e2"}},
		{"sku": {"KIT-1002"}, "qty": {"99999999999999999999"}},
		{"sku": {"KIT-1002"}, "qty": {"0x10"}},
		{"sku": {"KIT-1002"}, "qty": {"-0"}},
		{"sku": {"../../etc/passwd"}, "qty": {"1"}},
		{"sku": {"<script>alert(1)</script>"}, "qty": {"1"}},
		{"sku": {"KIT-1001", "KIT-1002"}, "qty": {"1000"}},
		{"name": {"A"}, "email": {"a@b.co"}, "address": {"1"}, "city": {"X"}, "postcode": {"12345"}, "shipping": {"standard", "express"}, "coupon": {"\xff\xfe"}},
		{"name": {"A"}, "email": {"a@b.co\r\nBcc: x@y.z"}, "address": {"1"}, "city": {"X"}, "postcode": {"12345"}, "shipping": {"standard"}},
	}
	kitHostile(t, a, []string{"/cart/add", "/cart/update", "/cart/remove", "/checkout", "/product/KIT-1001", "/", "/orders", "/cart"}, garbage,
		map[string]bool{"/checkout": true, "/product/KIT-1001": true, "/": true, "/orders": true, "/cart": true})
	// GETs never change state, whatever they carry.
	before := appState(t, a, nil)
	for _, p := range []string{"/cart?edit=KIT-1001&qty=5", "/checkout?name=x&coupon=SPRING10", "/product/KIT-1002?qty=3", "/search?q=" + strings.Repeat("%FF", 5000), "/search?page=-9", "/search?page=999999999999999999999", "/search?max=" + strings.Repeat("9", 50)} {
		if w := kitDo(a, "GET", p, nil); w.Code != 200 {
			t.Errorf("GET %s: %d", p, w.Code)
		}
	}
	if string(appState(t, a, nil)) != string(before) {
		t.Fatal("a GET changed the state")
	}
}

func TestShopLogFull(t *testing.T) {
	a, _ := loadApp(t, "shop")
	fillLog(&a.(*shop).journal)
	before := appState(t, a, nil)
	if w := kitDo(a, "POST", "/cart/add", url.Values{"sku": {"KIT-1001"}, "qty": {"1"}}); w.Code != http.StatusTooManyRequests {
		t.Fatalf("full log: %d", w.Code)
	}
	if string(appState(t, a, nil)) != string(before) {
		t.Fatal("a refused change changed the state")
	}
}

func TestShopConcurrent(t *testing.T) {
	a, _ := loadApp(t, "shop")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 5 {
				kitDo(a, "POST", "/cart/add", url.Values{"sku": {"OFF-2004"}, "qty": {"1"}})
				kitDo(a, "GET", "/cart", nil)
				kitDo(a, "GET", fmt.Sprintf("/search?page=%d", i+j), nil)
				a.State()
			}
		}()
	}
	wg.Wait()
	st := shopStateOf(t, a)
	if len(st.Cart) != 1 || st.Cart[0].Qty != 40 {
		t.Fatalf("cart %v", st.Cart)
	}
}
