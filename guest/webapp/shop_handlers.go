// The shop's page views and HTTP handlers: the catalogue and product pages,
// the cart, checkout, and the order pages, and the page templates.

package webapp

import (
	"embed"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// shopView is every page's data; each page reads the fields it needs.
type shopView struct {
	Site, Title string
	User        person
	CartCount   int
	Cats        []shopCat
	Q           string
	Flash       string
	Crumbs      []crumb
	Message     string // error page

	// listings
	Heading  string
	Items    []shopItem
	Pager    pager
	Filter   shopFilter
	Featured []shopItem

	// product
	P       *shopItem
	Qty     string
	QtyErr  string
	Related []shopItem

	// cart and checkout
	Lines    []shopLineView
	Subtotal int64
	CartErr  string

	F        shopForm
	Errs     map[string]string
	Ship     []shopShipView
	Sum      shopTotals
	Orders   []shopOrderView
	Order    *shopOrderView
	Placed   bool
	ErrCount int
	Focus    string // the checkout field with autofocus: the first with an error, else name
}

type shopItem struct {
	SKU, Name, Category, CatURL, URL, Description string
	Price                                         int64
	Stock                                         int
	Thumb, Glyph                                  string
}

type shopFilter struct {
	Category, Max, MaxErr, Sort string
	InStock                     bool
	Sorts                       []shopOpt
	CatOpts                     []shopOpt
}

type shopOpt struct {
	Value, Label string
	Selected     bool
}

type shopLineView struct {
	SKU, Name, URL, Qty, Err, Thumb, Glyph string
	Price, LineTotal                       int64
	Stock                                  int
	Focus                                  bool
}

type shopForm struct{ Name, Email, Address, City, Postcode, Shipping, Coupon string }

type shopShipView struct {
	ID, Name string
	Price    int64
	Checked  bool
}

type shopTotals struct {
	Subtotal, Discount, Shipping, Total int64
	Coupon                              string
	Percent                             int
	CouponNote                          string
}

type shopOrderView struct {
	shopOrder
	URL, ShippingName string
	Items             int
}

var shopGlyphs = []string{"◆", "●", "▲", "■", "★", "✦", "❖", "⬢", "✿", "◐"}

func (s *shop) item(p *shopProduct) shopItem {
	h := fnvHash([]byte(p.Category))
	return shopItem{
		SKU: p.SKU, Name: p.Name, Category: p.Category, Description: p.Description,
		CatURL: "/category/" + url.PathEscape(p.Category), URL: "/product/" + url.PathEscape(p.SKU),
		Price: p.PriceCents, Stock: p.Stock,
		Thumb: "t" + strconv.Itoa(int(fnvHash([]byte(p.SKU))%8)), Glyph: shopGlyphs[h%uint32(len(shopGlyphs))],
	}
}

func (s *shop) cartCount() int {
	n := 0
	for _, l := range s.cart {
		n += l.Qty
	}
	return n
}

func (s *shop) cartSubtotal() int64 {
	var t int64
	for _, l := range s.cart {
		t += int64(l.Qty) * l.PriceCents
	}
	return t
}

func (s *shop) cartIndex(sku string) int {
	for i, l := range s.cart {
		if l.SKU == sku {
			return i
		}
	}
	return -1
}

// view starts a page's data with the site chrome and the flash the
// redirect named (?msg=; fixed texts only, never the query's own words).
func (s *shop) view(r *http.Request, title string) *shopView {
	q := r.URL.Query()
	v := &shopView{Site: s.site, Title: title, User: s.user, CartCount: s.cartCount(), Cats: s.cats}
	v.Q, _ = cleanLine(shopClip(q.Get("q"), 200), 200)
	name := ""
	if p := s.bySKU[q.Get("sku")]; p != nil {
		name = p.Name
	}
	switch q.Get("msg") {
	case "added":
		if name != "" {
			v.Flash = "✓ Added “" + name + "” to your cart."
		}
	case "updated":
		if name != "" {
			v.Flash = "✓ Updated the quantity of “" + name + "”."
		}
	case "removed":
		if name != "" {
			v.Flash = "✓ Removed “" + name + "” from your cart."
		}
	case "placed":
		v.Flash = "✓ Thank you! Your order has been placed."
	}
	return v
}

func shopClip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return s
}

func (s *shop) errorPage(r *http.Request, code int, title, msg string) answer {
	v := s.view(r, title)
	v.Flash = ""
	v.Message = msg
	v.Crumbs = []crumb{{"Home", "/"}, {title, ""}}
	return render(shopPages["error"], code, v)
}

func (s *shop) tooMany(r *http.Request) answer {
	return s.errorPage(r, http.StatusTooManyRequests, "Too many changes", "This store can’t record any more changes in this session.")
}

func (s *shop) home(r *http.Request) answer {
	v := s.view(r, "Home")
	for i, p := range s.products {
		if i == 8 {
			break
		}
		v.Featured = append(v.Featured, s.item(p))
	}
	return render(shopPages["home"], 200, v)
}

func (s *shop) category(r *http.Request) answer {
	name := r.PathValue("name")
	for _, c := range s.cats {
		if strings.EqualFold(c.Name, name) {
			return s.listing(r, c.Name)
		}
	}
	return s.errorPage(r, http.StatusNotFound, "Category not found", "There is no category by that name.")
}

// listing is the search page; cat non-empty is a category's page.
func (s *shop) listing(r *http.Request, cat string) answer {
	q := r.URL.Query()
	v := s.view(r, "Search")
	base := "/search"
	f := shopFilter{Category: cat, Sort: q.Get("sort"), InStock: q.Get("instock") != ""}
	if cat == "" {
		for _, c := range s.cats {
			if strings.EqualFold(c.Name, q.Get("category")) {
				f.Category = c.Name
			}
		}
	} else {
		base = "/category/" + url.PathEscape(cat)
		v.Title = cat
	}
	f.Max, _ = cleanLine(shopClip(q.Get("max"), 20), 20)
	maxCents := int64(-1)
	if f.Max != "" {
		if c, ok := parseCents(f.Max); ok {
			maxCents = c
		} else {
			f.MaxErr = "Enter a price like 25 or 25.00."
		}
	}
	switch f.Sort {
	case "price-asc", "price-desc", "name":
	default:
		f.Sort = "relevance"
	}
	for _, o := range [][2]string{{"relevance", "Best match"}, {"price-asc", "Price: low to high"}, {"price-desc", "Price: high to low"}, {"name", "Name: A to Z"}} {
		f.Sorts = append(f.Sorts, shopOpt{o[0], o[1], o[0] == f.Sort})
	}
	f.CatOpts = append(f.CatOpts, shopOpt{"", "All categories", f.Category == ""})
	for _, c := range s.cats {
		f.CatOpts = append(f.CatOpts, shopOpt{c.Name, c.Name, c.Name == f.Category})
	}
	terms := strings.Fields(strings.ToLower(v.Q))
	if len(terms) > 10 {
		terms = terms[:10]
	}
	type hit struct {
		p     *shopProduct
		score int
	}
	var hits []hit
	for _, p := range s.products {
		if f.Category != "" && p.Category != f.Category || f.InStock && p.Stock == 0 || maxCents >= 0 && p.PriceCents > maxCents {
			continue
		}
		score, ok := 0, true
		name := strings.ToLower(p.Name)
		rest := strings.ToLower(p.SKU + " " + p.Category + " " + p.Description)
		for _, t := range terms {
			switch {
			case strings.Contains(name, t):
				score += 3
			case strings.Contains(rest, t):
				score++
			default:
				ok = false
			}
		}
		if ok {
			hits = append(hits, hit{p, score})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		a, b := hits[i].p, hits[j].p
		switch f.Sort {
		case "price-asc":
			return a.PriceCents < b.PriceCents
		case "price-desc":
			return a.PriceCents > b.PriceCents
		case "name":
			return strings.ToLower(a.Name) < strings.ToLower(b.Name)
		}
		return hits[i].score > hits[j].score
	})
	pq := url.Values{}
	for _, k := range []string{"q", "category", "max", "instock", "sort"} {
		if x := q.Get(k); x != "" && !(cat != "" && k == "category") {
			pq.Set(k, shopClip(x, 200))
		}
	}
	var lo, hi int
	v.Pager, lo, hi = paginate(len(hits), shopPerPage, q.Get("page"), base, pq)
	for _, h := range hits[lo:hi] {
		v.Items = append(v.Items, s.item(h.p))
	}
	v.Filter = f
	switch {
	case cat != "":
		v.Heading = cat
		v.Crumbs = []crumb{{"Home", "/"}, {cat, ""}}
	case v.Q != "":
		v.Heading = "Results for “" + v.Q + "”"
		v.Crumbs = []crumb{{"Home", "/"}, {"Search", ""}}
	default:
		v.Heading = "All products"
		v.Crumbs = []crumb{{"Home", "/"}, {"All products", ""}}
	}
	return render(shopPages["list"], 200, v)
}

func (s *shop) productView(r *http.Request, p *shopProduct) *shopView {
	v := s.view(r, p.Name)
	it := s.item(p)
	v.P = &it
	v.Crumbs = []crumb{{"Home", "/"}, {p.Category, it.CatURL}, {p.Name, ""}}
	for _, o := range s.products {
		if o != p && o.Category == p.Category && len(v.Related) < 4 {
			v.Related = append(v.Related, s.item(o))
		}
	}
	return v
}

func (s *shop) productPage(r *http.Request) answer {
	p := s.bySKU[r.PathValue("sku")]
	if p == nil {
		return s.errorPage(r, http.StatusNotFound, "Product not found", "We couldn’t find that product. It may have been removed from the catalog.")
	}
	v := s.productView(r, p)
	v.Qty = "1"
	if n, err := strconv.Atoi(r.URL.Query().Get("qty")); err == nil && n >= 1 && n <= shopMaxQty {
		v.Qty = strconv.Itoa(n)
	}
	return render(shopPages["product"], 200, v)
}

// shopQty reads a quantity field: lo..99.
func shopQty(s string, lo int) (int, string) {
	s = strings.TrimSpace(s)
	n, err := strconv.Atoi(s)
	if err != nil || s == "" || len(s) > 3 || strings.Trim(s, "0123456789") != "" || n < lo || n > shopMaxQty {
		return 0, fmt.Sprintf("Enter a quantity from %d to %d.", lo, shopMaxQty)
	}
	return n, ""
}

func (s *shop) cartAdd(r *http.Request, f url.Values) answer {
	p := s.bySKU[f.Get("sku")]
	if p == nil {
		return s.errorPage(r, http.StatusNotFound, "Product not found", "We couldn’t find that product.")
	}
	n, msg := shopQty(f.Get("qty"), 1)
	i := s.cartIndex(p.SKU)
	have := 0
	if i >= 0 {
		have = s.cart[i].Qty
	}
	switch {
	case msg != "":
	case p.Stock == 0:
		msg = "Sorry, this item is out of stock."
	case have+n > shopMaxQty:
		msg = fmt.Sprintf("You can have at most %d of an item in your cart (you already have %d).", shopMaxQty, have)
	case have+n > p.Stock && have > 0:
		msg = fmt.Sprintf("Only %d in stock, and you already have %d in your cart.", p.Stock, have)
	case have+n > p.Stock:
		msg = fmt.Sprintf("Only %d in stock.", p.Stock)
	case i < 0 && len(s.cart) >= shopMaxLines:
		msg = fmt.Sprintf("Your cart is full (%d different items).", shopMaxLines)
	}
	if msg != "" {
		v := s.productView(r, p)
		v.Qty, _ = cleanLine(shopClip(f.Get("qty"), 10), 10)
		v.QtyErr = msg
		return render(shopPages["product"], http.StatusUnprocessableEntity, v)
	}
	if !s.add("add_to_cart", map[string]string{"sku": p.SKU, "qty": strconv.Itoa(n), "cart_qty": strconv.Itoa(have + n)}) {
		return s.tooMany(r)
	}
	if i >= 0 {
		s.cart[i].Qty += n
	} else {
		s.cart = append(s.cart, shopLine{SKU: p.SKU, Name: p.Name, Qty: n, PriceCents: p.PriceCents})
	}
	return redirect("/cart?msg=added&sku=" + url.QueryEscape(p.SKU))
}

func (s *shop) cartUpdate(r *http.Request, f url.Values) answer {
	sku := f.Get("sku")
	i := s.cartIndex(sku)
	if i < 0 {
		return s.errorPage(r, http.StatusNotFound, "Not in your cart", "That item is not in your cart.")
	}
	n, msg := shopQty(f.Get("qty"), 0)
	if p := s.bySKU[sku]; msg == "" && n > p.Stock {
		msg = fmt.Sprintf("Only %d in stock.", p.Stock)
	}
	if msg != "" {
		typed, _ := cleanLine(shopClip(f.Get("qty"), 10), 10)
		return s.cartPage(r, http.StatusUnprocessableEntity, sku, typed, msg)
	}
	if n == 0 {
		if !s.add("remove_from_cart", map[string]string{"sku": sku}) {
			return s.tooMany(r)
		}
		s.cart = append(s.cart[:i], s.cart[i+1:]...)
		return redirect("/cart?msg=removed&sku=" + url.QueryEscape(sku))
	}
	if !s.add("update_cart", map[string]string{"sku": sku, "qty": strconv.Itoa(n)}) {
		return s.tooMany(r)
	}
	s.cart[i].Qty = n
	return redirect("/cart?msg=updated&sku=" + url.QueryEscape(sku))
}

func (s *shop) cartRemove(r *http.Request, f url.Values) answer {
	sku := f.Get("sku")
	i := s.cartIndex(sku)
	if i < 0 {
		return s.errorPage(r, http.StatusNotFound, "Not in your cart", "That item is not in your cart.")
	}
	if !s.add("remove_from_cart", map[string]string{"sku": sku}) {
		return s.tooMany(r)
	}
	s.cart = append(s.cart[:i], s.cart[i+1:]...)
	return redirect("/cart?msg=removed&sku=" + url.QueryEscape(sku))
}

// lines is the cart as the cart and checkout pages show it; the line
// for sku gets focus (else the first), and errSKU's line shows typed/err.
func (s *shop) lines(focus, errSKU, typed, err string) []shopLineView {
	out := make([]shopLineView, 0, len(s.cart))
	found := false
	for _, l := range s.cart {
		found = found || l.SKU == focus
	}
	for i, l := range s.cart {
		p := s.bySKU[l.SKU]
		it := s.item(p)
		lv := shopLineView{SKU: l.SKU, Name: l.Name, URL: it.URL, Qty: strconv.Itoa(l.Qty), Price: l.PriceCents,
			LineTotal: int64(l.Qty) * l.PriceCents, Stock: p.Stock, Thumb: it.Thumb, Glyph: it.Glyph,
			Focus: l.SKU == focus || !found && i == 0}
		if l.SKU == errSKU {
			lv.Qty, lv.Err = typed, err
		}
		out = append(out, lv)
	}
	return out
}

func (s *shop) cartPage(r *http.Request, code int, errSKU, typed, err string) answer {
	v := s.view(r, "Shopping cart")
	focus := r.URL.Query().Get("edit")
	if errSKU != "" {
		focus = errSKU
	}
	v.Lines = s.lines(focus, errSKU, typed, err)
	v.Subtotal = s.cartSubtotal()
	v.Crumbs = []crumb{{"Home", "/"}, {"Cart", ""}}
	return render(shopPages["cart"], code, v)
}

func (s *shop) shipOption(id string) *shopShipping {
	for i := range s.shipping {
		if s.shipping[i].ID == id {
			return &s.shipping[i]
		}
	}
	return nil
}

// totals prices the cart with a shipping option and coupon code ("" for
// none; an unknown one is reported in CouponNote and not applied).
func (s *shop) totals(ship *shopShipping, code string) shopTotals {
	t := shopTotals{Subtotal: s.cartSubtotal()}
	if ship != nil {
		t.Shipping = ship.PriceCents
	}
	if code != "" {
		if c, ok := s.coupons[strings.ToUpper(code)]; ok {
			t.Coupon, t.Percent = c.Code, c.PercentOff
			t.Discount = (t.Subtotal*int64(c.PercentOff) + 50) / 100
		} else {
			t.CouponNote = "“" + code + "” is not a valid coupon code."
		}
	}
	t.Total = t.Subtotal - t.Discount + t.Shipping
	return t
}

func (s *shop) checkoutView(r *http.Request, f shopForm) *shopView {
	v := s.view(r, "Checkout")
	v.Crumbs = []crumb{{"Home", "/"}, {"Cart", "/cart"}, {"Checkout", ""}}
	v.Lines = s.lines("", "", "", "")
	v.F = f
	ship := s.shipOption(f.Shipping)
	if ship == nil {
		ship = &s.shipping[0]
	}
	for _, o := range s.shipping {
		v.Ship = append(v.Ship, shopShipView{ID: o.ID, Name: o.Name, Price: o.PriceCents, Checked: o.ID == ship.ID})
	}
	v.Sum = s.totals(ship, f.Coupon)
	v.Errs = map[string]string{}
	v.Focus = "name"
	return v
}

func (s *shop) checkoutPage(r *http.Request) answer {
	q := r.URL.Query()
	get := func(k, def string, max int) string {
		if x, ok := q[k]; ok && len(x) > 0 {
			t, _ := cleanLine(shopClip(x[0], max*4), max)
			return t
		}
		return def
	}
	f := shopForm{
		Name: get("name", s.user.Name, 100), Email: get("email", s.user.Email, 254),
		Address: get("address", "", 200), City: get("city", "", 100), Postcode: get("postcode", "", 10),
		Shipping: get("shipping", "", 40), Coupon: get("coupon", "", 40),
	}
	v := s.checkoutView(r, f)
	if len(s.cart) == 0 {
		v.Title = "Your cart is empty"
	}
	return render(shopPages["checkout"], 200, v)
}

func (s *shop) checkout(r *http.Request, pf url.Values) answer {
	errs := map[string]string{}
	field := func(k string, max int, required string) string {
		t, msg := cleanLine(pf.Get(k), max)
		if msg == "" && t == "" && required != "" {
			msg = required
		}
		if msg != "" {
			errs[k] = msg
		}
		return t
	}
	f := shopForm{
		Name:     field("name", 100, "Enter your full name."),
		Email:    field("email", 254, "Enter your email address."),
		Address:  field("address", 200, "Enter your street address."),
		City:     field("city", 100, "Enter your city."),
		Postcode: field("postcode", 10, "Enter your postcode."),
		Shipping: field("shipping", 40, "Choose a shipping method."),
		Coupon:   field("coupon", 40, ""),
	}
	if errs["email"] == "" && !mailboxOK(f.Email) {
		errs["email"] = "Enter an email address like name@example.com."
	}
	if errs["postcode"] == "" {
		for _, c := range f.Postcode {
			if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == ' ' || c == '-') {
				errs["postcode"] = "A postcode has only letters, digits, spaces and hyphens."
				break
			}
		}
		if errs["postcode"] == "" && len(f.Postcode) < 3 {
			errs["postcode"] = "Enter a postcode of at least 3 characters."
		}
	}
	ship := s.shipOption(f.Shipping)
	if errs["shipping"] == "" && ship == nil {
		errs["shipping"] = "Choose one of the shipping methods."
	}
	var coupon shopCoupon
	if f.Coupon != "" && errs["coupon"] == "" {
		c, ok := s.coupons[strings.ToUpper(f.Coupon)]
		if !ok {
			errs["coupon"] = "“" + f.Coupon + "” is not a valid coupon code."
		}
		coupon = c
	}
	cartErr := ""
	if len(s.cart) == 0 {
		cartErr = "Your cart is empty: add something before checking out."
	}
	for _, l := range s.cart {
		if p := s.bySKU[l.SKU]; l.Qty > p.Stock {
			cartErr = fmt.Sprintf("Only %d of “%s” left in stock: update your cart.", p.Stock, p.Name)
		}
	}
	if cartErr == "" && len(s.orders) >= shopMaxOrders {
		cartErr = "This account can’t place any more orders."
	}
	if len(errs) > 0 || cartErr != "" {
		v := s.checkoutView(r, f)
		v.Errs = errs
		v.ErrCount = len(errs)
		if k := firstErr(errs, "name", "email", "address", "city", "postcode", "coupon"); k != "" {
			v.Focus = k
		}
		v.CartErr = cartErr
		v.Sum.CouponNote = ""
		return render(shopPages["checkout"], http.StatusUnprocessableEntity, v)
	}
	t := s.totals(ship, coupon.Code)
	o := shopOrder{
		Number: "NM-" + strconv.Itoa(s.orderBase+len(s.orders)+1), Date: epoch.Format("2006-01-02"),
		Lines: append([]shopLine{}, s.cart...), SubtotalCents: t.Subtotal, DiscountCents: t.Discount,
		ShippingCents: t.Shipping, TotalCents: t.Total, Name: f.Name, Email: f.Email, Address: f.Address,
		City: f.City, Postcode: f.Postcode, Shipping: ship.ID, Coupon: coupon.Code,
	}
	var items []string
	for _, l := range o.Lines {
		items = append(items, l.SKU+"x"+strconv.Itoa(l.Qty))
	}
	if !s.add("place_order", map[string]string{
		"number": o.Number, "lines": strings.Join(items, ","), "subtotal_cents": strconv.FormatInt(o.SubtotalCents, 10),
		"discount_cents": strconv.FormatInt(o.DiscountCents, 10), "shipping_cents": strconv.FormatInt(o.ShippingCents, 10),
		"total_cents": strconv.FormatInt(o.TotalCents, 10), "name": o.Name, "email": o.Email, "address": o.Address,
		"city": o.City, "postcode": o.Postcode, "shipping": o.Shipping, "coupon": o.Coupon,
	}) {
		return s.tooMany(r)
	}
	for _, l := range o.Lines {
		s.bySKU[l.SKU].Stock -= l.Qty
	}
	s.cart = []shopLine{}
	s.orders = append(s.orders, o)
	return redirect("/order/" + url.PathEscape(o.Number) + "?msg=placed")
}

func (s *shop) orderView(o shopOrder) shopOrderView {
	ov := shopOrderView{shopOrder: o, URL: "/order/" + url.PathEscape(o.Number), ShippingName: o.Shipping}
	if sh := s.shipOption(o.Shipping); sh != nil {
		ov.ShippingName = sh.Name
	}
	for _, l := range o.Lines {
		ov.Items += l.Qty
	}
	return ov
}

func (s *shop) ordersPage(r *http.Request) answer {
	v := s.view(r, "Your orders")
	v.Crumbs = []crumb{{"Home", "/"}, {"Your orders", ""}}
	for i := len(s.orders) - 1; i >= 0; i-- {
		v.Orders = append(v.Orders, s.orderView(s.orders[i]))
	}
	return render(shopPages["orders"], 200, v)
}

func (s *shop) orderPage(r *http.Request) answer {
	n := r.PathValue("number")
	for _, o := range s.orders {
		if o.Number == n {
			v := s.view(r, "Order "+o.Number)
			ov := s.orderView(o)
			v.Order = &ov
			v.Placed = r.URL.Query().Get("msg") == "placed"
			v.Flash = ""
			v.Crumbs = []crumb{{"Home", "/"}, {"Your orders", "/orders"}, {o.Number, ""}}
			return render(shopPages["order"], 200, v)
		}
	}
	return s.errorPage(r, http.StatusNotFound, "Order not found", "We couldn’t find an order with that number.")
}

// shopFS holds the shop's page templates.
//
//go:embed pages/shop/*.html
var shopFS embed.FS

var shopPages = parsePages(shopFS, "pages/shop", plainFuncs)
