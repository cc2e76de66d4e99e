// Package webapp holds the offline web applications a sandbox serves on its
// own loopback (docs/architecture.md, "Web apps"): a shop, a webmail, a wiki,
// an admin panel and a calendar. guestd serves them; the agent reaches them
// only through the browser, and the verifier reads what they recorded.
//
// Each app is built from the task instance's data (JSON the task family
// generates from its seed) and keeps its state server-side. Its State is
// the ground truth a verifier scores: what the agent's browser shows or
// claims never enters the verdict.
package webapp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
)

// App is one running web application.
type App interface {
	// ServeHTTP serves the app's pages and form posts. Every handler
	// bounds what it reads (see MaxBody) and never blocks on the client.
	http.Handler
	// State is the app's server-side record as JSON: the data it started
	// from with every change the agent made applied, and a log of the
	// agent's actions. It is what the verifier reads, and what a forked
	// sandbox restores the app from (New with saved set).
	State() ([]byte, error)
}

// Factory builds an app from the instance's data. With saved non-nil (a
// State of an earlier app of the same kind) it resumes that state instead.
type Factory func(data, saved []byte) (App, error)

// Host is the name each app answers to: the browser reaches app X at
// http://X.test/ (guestd maps *.test to its loopback listener).
func Host(name string) string { return name + ".test" }

// MaxBody bounds a request body an app reads (form posts, uploads).
const MaxBody = 1 << 20

// MaxData bounds the instance data an app is built from.
const MaxData = 4 << 20

var registry = map[string]Factory{}

// register adds an app; each app's file calls it from init.
func register(name string, f Factory) {
	if _, dup := registry[name]; dup {
		panic("webapp: duplicate app " + name)
	}
	registry[name] = f
}

// Names lists the apps, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// New builds app name from data (and saved state, if any).
func New(name string, data, saved []byte) (App, error) {
	f, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("webapp: no app %q (have %v)", name, Names())
	}
	if len(data) > MaxData {
		return nil, fmt.Errorf("webapp: %s: data is %d bytes, over %d", name, len(data), MaxData)
	}
	if len(data) == 0 {
		data = []byte("{}")
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("webapp: %s: data is not JSON", name)
	}
	return f(data, saved)
}
