package webapp

// The shop app: an online store ("Northwind Market") with a catalog,
// search and filters, product pages, a cart, a checkout with coupons and
// shipping options, and an order history.
//
// Keyboard paths. Every change is a POST from a form whose page gives the
// form's first relevant field focus (autofocus); the page's own content
// comes before the site header in the DOM (the header is drawn on top by
// CSS), so Tab order starts in the form. To open a page: ctrl+l, type the
// URL (http://shop.test/...), Enter. Every form is posted by Enter from a
// text field.
//
//	add to cart       open /product/SKU (or /product/SKU?qty=N); the
//	                  Quantity field has focus (holding "1", or N); ctrl+a,
//	                  type N, Enter. Tab order: Quantity, Add to cart.
//	                  Done: 303 to /cart?msg=added&sku=SKU.
//	change quantity   open /cart?edit=SKU; that line's Quantity field has
//	                  focus; ctrl+a, type N, Enter (0 removes the line).
//	                  Tab order per line: Quantity, Update, Remove.
//	                  Done: 303 to /cart?msg=updated&sku=SKU.
//	remove from cart  open /cart?edit=SKU; Tab, Tab (past Update to Remove),
//	                  Enter. Done: 303 to /cart?msg=removed&sku=SKU.
//	place order       open /checkout?name=..&email=..&address=..&city=..
//	                  &postcode=..&shipping=ID&coupon=CODE (each parameter
//	                  optional; URL-escape the values); Full name has focus;
//	                  Enter places the order. Typing instead, the Tab order
//	                  is: Full name, Email, Street address, City, Postcode,
//	                  Shipping (a radio group: one Tab stop, the arrow keys
//	                  pick the option), Coupon code, Place order. Name and
//	                  email start filled from the account (ctrl+a, then
//	                  type, to replace them). Done: 303 to
//	                  /order/NUMBER?msg=placed, which shows the order number.
//
// A rejected form (bad quantity, too few in stock, a missing or invalid
// checkout field, an unknown coupon) answers 422 with the form shown again
// as typed, each error beside its field and the first invalid field
// focused; nothing changes. Read-only pages: / (home), /search?q=&category=&max=&instock=1&sort=
// (sort: relevance, price-asc, price-desc, name; max: dollars; page=N),
// /category/NAME, /product/SKU, /cart, /checkout, /orders, /order/NUMBER.

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

func init() { register("shop", newShop) }

const (
	shopMaxLines    = 100  // distinct products in the cart
	shopMaxQty      = 99   // of one product in the cart
	shopMaxOrders   = 500  // orders one instance records
	shopMaxProducts = 5000 // products in the data
	shopMaxCents    = 1e9  // one price, in cents
	shopPerPage     = 12
)

// shopData is the shop's instance data:
//
//	{
//	  "site": "Northwind Market",                      // optional store name
//	  "user": {"name": "Ada Park", "email": "ada@example.com"},
//	  "products": [{"sku": "NW-1001", "name": "Steel Water Bottle",
//	                "category": "Kitchen", "price_cents": 1899, "stock": 12,
//	                "description": "..."}],
//	  "coupons": [{"code": "SPRING10", "percent_off": 10}],
//	  "shipping": [{"id": "standard", "name": "Standard (3–5 days)", "price_cents": 499}]
//	}
//
// A sku is 1–40 of A–Z a–z 0–9 . _ - and must be unique (a duplicate is
// an error); price_cents and stock are integers ≥ 0 (money is integer
// cents everywhere). A product without a name takes its sku, without a
// category "General". Coupon codes match case-insensitively; percent_off
// is 1–100; a duplicate code is an error. "shipping_options" is accepted
// for "shipping"; without either the shop offers standard ($4.99) and
// express ($12.99). Totals: subtotal = Σ qty × price_cents; discount =
// subtotal × percent_off / 100 rounded to the nearest cent (halves up);
// shipping is never discounted; total = subtotal − discount + shipping.
type shopData struct {
	Site            string         `json:"site"`
	User            person         `json:"user"`
	Products        []shopProduct  `json:"products"`
	Coupons         []shopCoupon   `json:"coupons"`
	Shipping        []shopShipping `json:"shipping"`
	ShippingOptions []shopShipping `json:"shipping_options"`
}

type shopProduct struct {
	SKU         string `json:"sku"`
	Name        string `json:"name"`
	Category    string `json:"category"`
	PriceCents  int64  `json:"price_cents"`
	Stock       int    `json:"stock"`
	Description string `json:"description"`
}

type shopCoupon struct {
	Code       string `json:"code"`
	PercentOff int    `json:"percent_off"`
}

type shopShipping struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
}

// shopLine is a cart or order line; price_cents is the unit price.
type shopLine struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	Qty        int    `json:"qty"`
	PriceCents int64  `json:"price_cents"`
}

type shopOrder struct {
	Number        string     `json:"number"`
	Date          string     `json:"date"`
	Lines         []shopLine `json:"lines"`
	SubtotalCents int64      `json:"subtotal_cents"`
	DiscountCents int64      `json:"discount_cents"`
	ShippingCents int64      `json:"shipping_cents"`
	TotalCents    int64      `json:"total_cents"`
	Name          string     `json:"name"`
	Email         string     `json:"email"`
	Address       string     `json:"address"`
	City          string     `json:"city"`
	Postcode      string     `json:"postcode"`
	Shipping      string     `json:"shipping"` // the option's id
	Coupon        string     `json:"coupon"`   // the code as the data spells it; "" for none
}

// shopState is State's JSON, and what a saved state resumes from
// (products' stock, cart, orders and log; the rest comes from the data).
type shopState struct {
	Site              string        `json:"site"`
	User              person        `json:"user"`
	Products          []shopProduct `json:"products"`
	Cart              []shopLine    `json:"cart"`
	CartSubtotalCents int64         `json:"cart_subtotal_cents"`
	Orders            []shopOrder   `json:"orders"`
	Log               []Event       `json:"log"`
}

type shop struct {
	journal
	site      string
	user      person
	products  []*shopProduct
	bySKU     map[string]*shopProduct
	cats      []shopCat
	coupons   map[string]shopCoupon // by upper-case code
	shipping  []shopShipping
	cart      []shopLine
	orders    []shopOrder
	orderBase int
	web       router
}

type shopCat struct {
	Name  string
	URL   string
	Count int
}

// newShop builds the shop from its data (see shopData) and, with saved
// set, resumes a State.
func newShop(data, saved []byte) (App, error) {
	var d shopData
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("shop: data: %w", err)
	}
	s := &shop{
		site:    strings.TrimSpace(d.Site),
		user:    d.User,
		bySKU:   map[string]*shopProduct{},
		coupons: map[string]shopCoupon{},
		cart:    []shopLine{},
		orders:  []shopOrder{},
	}
	s.Log = []Event{}
	if s.site == "" {
		s.site = "Northwind Market"
	}
	if s.user.Name == "" {
		s.user.Name = "Guest"
	}
	if len(d.Products) > shopMaxProducts {
		return nil, fmt.Errorf("shop: %d products, over %d", len(d.Products), shopMaxProducts)
	}
	catCount := map[string]int{}
	for i := range d.Products {
		p := d.Products[i]
		p.SKU = strings.TrimSpace(p.SKU)
		if !tokenOK(p.SKU, 40) {
			return nil, fmt.Errorf("shop: product %d: bad sku %q (1-40 of A-Z a-z 0-9 . _ -)", i, p.SKU)
		}
		if _, dup := s.bySKU[p.SKU]; dup {
			return nil, fmt.Errorf("shop: duplicate sku %q", p.SKU)
		}
		if p.PriceCents < 0 || p.PriceCents > shopMaxCents {
			return nil, fmt.Errorf("shop: product %s: price_cents %d out of range", p.SKU, p.PriceCents)
		}
		if p.Stock < 0 || p.Stock > 1e6 {
			return nil, fmt.Errorf("shop: product %s: stock %d out of range", p.SKU, p.Stock)
		}
		p.Name = strings.TrimSpace(p.Name)
		if p.Name == "" {
			p.Name = p.SKU
		}
		p.Category = strings.TrimSpace(p.Category)
		if p.Category == "" {
			p.Category = "General"
		}
		if _, ok := catCount[p.Category]; !ok {
			s.cats = append(s.cats, shopCat{Name: p.Category, URL: "/category/" + url.PathEscape(p.Category)})
		}
		catCount[p.Category]++
		s.products = append(s.products, &p)
		s.bySKU[p.SKU] = &p
	}
	for i := range s.cats {
		s.cats[i].Count = catCount[s.cats[i].Name]
	}
	sort.SliceStable(s.cats, func(i, j int) bool { return s.cats[i].Name < s.cats[j].Name })
	for _, c := range d.Coupons {
		c.Code = strings.TrimSpace(c.Code)
		if c.Code == "" || len(c.Code) > 40 {
			return nil, fmt.Errorf("shop: bad coupon code %q", c.Code)
		}
		if c.PercentOff < 1 || c.PercentOff > 100 {
			return nil, fmt.Errorf("shop: coupon %s: percent_off %d not in 1..100", c.Code, c.PercentOff)
		}
		k := strings.ToUpper(c.Code)
		if _, dup := s.coupons[k]; dup {
			return nil, fmt.Errorf("shop: duplicate coupon %q", c.Code)
		}
		s.coupons[k] = c
	}
	ships := d.Shipping
	if len(ships) == 0 {
		ships = d.ShippingOptions
	}
	if len(ships) == 0 {
		ships = []shopShipping{
			{ID: "standard", Name: "Standard (3–5 business days)", PriceCents: 499},
			{ID: "express", Name: "Express (1–2 business days)", PriceCents: 1299},
		}
	}
	seen := map[string]bool{}
	for _, o := range ships {
		o.ID = strings.TrimSpace(o.ID)
		if o.ID == "" || len(o.ID) > 40 || seen[o.ID] {
			return nil, fmt.Errorf("shop: shipping option id %q empty, too long or repeated", o.ID)
		}
		if o.PriceCents < 0 || o.PriceCents > shopMaxCents {
			return nil, fmt.Errorf("shop: shipping %s: price_cents %d out of range", o.ID, o.PriceCents)
		}
		if o.Name = strings.TrimSpace(o.Name); o.Name == "" {
			o.Name = o.ID
		}
		seen[o.ID] = true
		s.shipping = append(s.shipping, o)
	}
	s.orderBase = 100000 + int(fnvHash(data)%800000)
	if saved != nil {
		if err := s.resume(saved); err != nil {
			return nil, fmt.Errorf("shop: saved state: %w", err)
		}
	}
	s.routes()
	return s, nil
}

// resume applies a saved State: stock, cart, orders and log.
func (s *shop) resume(saved []byte) error {
	var st shopState
	if err := json.Unmarshal(saved, &st); err != nil {
		return err
	}
	for _, p := range st.Products {
		if q := s.bySKU[p.SKU]; q != nil {
			if p.Stock < 0 {
				return fmt.Errorf("product %s: negative stock", p.SKU)
			}
			q.Stock = p.Stock
		}
	}
	if len(st.Cart) > shopMaxLines {
		return fmt.Errorf("%d cart lines", len(st.Cart))
	}
	inCart := map[string]bool{}
	for _, l := range st.Cart {
		if s.bySKU[l.SKU] == nil || inCart[l.SKU] || l.Qty < 1 || l.Qty > shopMaxQty {
			return fmt.Errorf("bad cart line %+v", l)
		}
		inCart[l.SKU] = true
		s.cart = append(s.cart, l)
	}
	if len(st.Orders) > shopMaxOrders || len(st.Log) > MaxLog {
		return fmt.Errorf("too many orders or events")
	}
	s.orders = append(s.orders, st.Orders...)
	for i := range s.orders {
		if s.orders[i].Lines == nil {
			s.orders[i].Lines = []shopLine{}
		}
	}
	s.Log = append(s.Log, st.Log...)
	return nil
}

// State reports products (with current stock), cart, orders and the log.
func (s *shop) State() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := shopState{Site: s.site, User: s.user, Cart: s.cart, Orders: s.orders, Log: s.Log}
	st.Products = values(s.products)
	st.CartSubtotalCents = s.cartSubtotal()
	return json.Marshal(st)
}

func (s *shop) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.web.ServeHTTP(w, r) }

func (s *shop) routes() {
	s.web = newRouter(&s.mu, plainStyle)
	s.web.repeatOK = func(string, int) bool { return false } // no form of the shop repeats a field
	m := &s.web
	m.get("/{$}", s.home)
	m.get("/search", func(r *http.Request) answer { return s.listing(r, "") })
	m.get("/category/{name}", s.category)
	m.get("/product/{sku}", s.productPage)
	m.form("/cart/add", s.cartAdd)
	m.get("/cart", func(r *http.Request) answer { return s.cartPage(r, 200, "", "", "") })
	m.form("/cart/update", s.cartUpdate)
	m.form("/cart/remove", s.cartRemove)
	m.get("/checkout", s.checkoutPage)
	m.post("/checkout", s.checkout)
	m.get("/orders", s.ordersPage)
	m.get("/order/{number}", s.orderPage)
	m.handle("/", func(r *http.Request) answer {
		return s.errorPage(r, http.StatusNotFound, "Page not found", "We couldn’t find the page you were looking for.")
	})
}

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
