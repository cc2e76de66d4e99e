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
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
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
