// Package a11y is guestd's AT-SPI client: it reads the desktop's
// accessibility tree over D-Bus (the AT-SPI bus of the sandbox's session),
// renders it for models and tools with element ids that stay stable for an
// episode, diffs it against the previous observation, and acts on elements
// through the Action, Value and EditableText interfaces.
//
// Every call runs on the client's one worker under the caller's deadline:
// an application that does not answer (stopped, busy) costs a typed error
// within that deadline, never a wedged guest.
package a11y

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/shinken-rl/shinken/aci"
)

// Config configures a Client.
type Config struct {
	// Address is the AT-SPI bus address (a D-Bus address).
	Address string
	Caps    Caps
	// QuietMS and MaxSettleMS bound the settle before a walk: it waits
	// until no a11y change event has arrived for QuietMS (default 60), for
	// at most MaxSettleMS (default 1000).
	QuietMS, MaxSettleMS int
	// DiffLines is the line budget of a diff (default 40): a bigger diff
	// is sent as the whole tree.
	DiffLines int
	Logf      func(format string, args ...any)
}

// Client is one connection to the AT-SPI bus with its episode state (ids,
// the previous tree). Its methods are safe for concurrent use; they run one
// at a time on its worker.
type Client struct {
	cfg   Config
	roles roleNames
	jobs  chan func()
	quit  chan struct{}
	done  chan struct{}

	lastEvent atomic.Int64 // unix nanos of the last change event
	events    atomic.Int64 // change events seen

	// Owned by the worker.
	conn *dbus.Conn
	ids  *ids
	prev *tree
	rev  int
	once sync.Once
}

// New returns a client for cfg.Address. It connects on first use (and again
// after the bus drops it).
func New(cfg Config) *Client {
	cfg.Caps.fill()
	if cfg.QuietMS <= 0 {
		cfg.QuietMS = 60
	}
	if cfg.MaxSettleMS <= 0 {
		cfg.MaxSettleMS = 1000
	}
	if cfg.DiffLines <= 0 {
		cfg.DiffLines = 40
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	c := &Client{cfg: cfg, jobs: make(chan func()), quit: make(chan struct{}), done: make(chan struct{}), ids: newIDs()}
	go c.work()
	return c
}

func (c *Client) work() {
	defer close(c.done)
	for {
		select {
		case j := <-c.jobs:
			j()
		case <-c.quit:
			if c.conn != nil {
				c.conn.Close()
			}
			return
		}
	}
}

// Close ends the worker (after the job it runs, which its own deadline
// bounds) and the connection.
func (c *Client) Close() {
	c.once.Do(func() { close(c.quit) })
	<-c.done
}

// do runs fn on the worker and waits for it under ctx: a worker still busy
// with a job past ctx's deadline answers timeout.
func do[T any](ctx context.Context, c *Client, what string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	type result struct {
		v   T
		err error
	}
	got := make(chan result, 1)
	job := func() {
		defer func() {
			if r := recover(); r != nil {
				got <- result{err: aci.Errorf(aci.CodeInternal, "a11y: %s: panic: %v", what, r)}
			}
		}()
		v, err := fn(ctx)
		got <- result{v, err}
	}
	select {
	case c.jobs <- job:
	case <-ctx.Done():
		return zero, aci.Errorf(aci.CodeTimeout, "a11y: %s: the accessibility worker is still busy with an earlier call", what)
	case <-c.quit:
		return zero, aci.Errorf(aci.CodeUnsupported, "a11y: client closed")
	}
	select {
	case r := <-got:
		return r.v, r.err
	case <-ctx.Done():
		return zero, aci.Errorf(aci.CodeTimeout, "a11y: %s: no answer within the deadline", what)
	}
}

// connect (on the worker) dials the bus when there is no live connection,
// subscribes to change events and asks the registry to have applications
// send them.
func (c *Client) connect(ctx context.Context) (*dbus.Conn, error) {
	if c.conn != nil && c.conn.Connected() {
		return c.conn, nil
	}
	if c.conn != nil { // dropped by the bus: its event goroutine ends with it
		c.conn.Close()
		c.conn = nil
	}
	if c.cfg.Address == "" {
		return nil, aci.Errorf(aci.CodeUnsupported, "a11y: no accessibility bus in this sandbox")
	}
	conn, err := dbus.Connect(c.cfg.Address, dbus.WithContext(ctx))
	if err != nil {
		return nil, aci.Errorf(aci.CodeUnsupported, "a11y: connect to the accessibility bus: %v", err)
	}
	for _, iface := range []string{"org.a11y.atspi.Event.Object", "org.a11y.atspi.Event.Window"} {
		if err := conn.AddMatchSignalContext(ctx, dbus.WithMatchInterface(iface)); err != nil {
			conn.Close()
			return nil, aci.Errorf(aci.CodeUnsupported, "a11y: subscribe to events: %v", err)
		}
	}
	sigs := make(chan *dbus.Signal, 256)
	conn.Signal(sigs)
	go func() { // ends when the connection closes its signal channels
		for range sigs {
			c.events.Add(1)
			c.lastEvent.Store(time.Now().UnixNano())
		}
	}()
	reg := objRef{Bus: registryName, Path: "/org/a11y/atspi/registry"}
	for _, ev := range []string{"object:", "window:"} {
		// at-spi2-core 2.46 takes (event, properties, app); older ones (event).
		if err := call(ctx, conn, reg, ifRegistry+".RegisterEvent", nil, ev, []string{}, ""); err != nil {
			call(ctx, conn, reg, ifRegistry+".RegisterEvent", nil, ev)
		}
	}
	c.conn = conn
	return conn, nil
}

// Reset starts a new episode: ids start again from e1 and the next diff
// has no previous tree.
func (c *Client) Reset(ctx context.Context) error {
	_, err := do(ctx, c, "reset", func(context.Context) (struct{}, error) {
		c.ids, c.prev, c.rev = newIDs(), nil, 0
		return struct{}{}, nil
	})
	return err
}

// settle waits until no change event has arrived for QuietMS, for at most
// MaxSettleMS: the tree an action changed has stopped changing.
func (c *Client) settle(ctx context.Context) (waited time.Duration, events int) {
	start := time.Now()
	n0 := c.events.Load()
	quiet := time.Duration(c.cfg.QuietMS) * time.Millisecond
	limit := start.Add(time.Duration(c.cfg.MaxSettleMS) * time.Millisecond)
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		now := time.Now()
		last := time.Unix(0, c.lastEvent.Load())
		if now.Sub(last) >= quiet || !now.Before(limit) {
			break
		}
		t.Reset(min(last.Add(quiet).Sub(now), limit.Sub(now)))
		select {
		case <-t.C:
		case <-ctx.Done():
			return time.Since(start), int(c.events.Load() - n0)
		}
	}
	return time.Since(start), int(c.events.Load() - n0)
}

// app is one application on the bus.
type app struct {
	ref  objRef
	name string
	pid  uint32
}

// apps lists the registered applications with their names and pids (pids
// come from the bus daemon, which always answers).
func (c *Client) apps(ctx context.Context, conn *dbus.Conn) ([]app, error) {
	var kids [][]any
	if err := call(ctx, conn, objRef{Bus: registryName, Path: rootPath}, ifAccessible+".GetChildren", []any{&kids}); err != nil {
		return nil, aci.Errorf(aci.CodeUnsupported, "a11y: the registry did not list applications: %v", err)
	}
	var out []app
	for _, k := range kids {
		r, ok := refOf(k)
		if !ok {
			continue
		}
		a := app{ref: r}
		conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.GetConnectionUnixProcessID", 0, r.Bus).Store(&a.pid)
		out = append(out, a)
	}
	return out, nil
}

// Snapshot settles, walks the focused application (the one whose pid owns
// the active window, activePID; every application when none matches) and
// renders it; mode diff answers a diff against the previous snapshot. A
// tree that could not be read comes back with Info.Error set and no
// elements.
func (c *Client) Snapshot(ctx context.Context, mode string, activePID int) (*aci.A11yTree, error) {
	return do(ctx, c, "observe", func(ctx context.Context) (*aci.A11yTree, error) {
		return c.snapshot(ctx, mode, activePID)
	})
}

func (c *Client) snapshot(ctx context.Context, mode string, activePID int) (*aci.A11yTree, error) {
	out := &aci.A11yTree{}
	waited, events := c.settle(ctx)
	out.SettleMS, out.Events = waited.Milliseconds(), events
	cur, err := c.walkTree(ctx, activePID, out)
	if err != nil || cur == nil {
		return out, err
	}
	out.Hash = cur.hash
	prev := c.prev
	if prev == nil || prev.hash != cur.hash {
		c.rev++
	}
	cur.rev = c.rev
	out.Rev = c.rev
	c.prev = cur
	if mode == aci.A11yDiff && prev != nil {
		if text, els, removed, ok := diff(prev, cur, c.cfg.DiffLines); ok {
			out.Diff, out.Base = true, prev.rev
			out.Text, out.Elements, out.Removed, out.FullText = text, els, removed, cur.text
			return out, nil
		}
	}
	out.Text, out.Elements = cur.text, cur.elements
	return out, nil
}

// walkTree walks and renders the tree (minting ids), filling out's walk
// facts; a tree that could not be read is out.Error and a nil tree.
func (c *Client) walkTree(ctx context.Context, activePID int, out *aci.A11yTree) (*tree, error) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, c.cfg.Caps.MaxWalk)
	defer cancel()
	conn, err := c.connect(wctx)
	if err != nil {
		out.Error = aci.AsError(err)
		return nil, nil
	}
	apps, err := c.apps(wctx, conn)
	if err != nil {
		out.Error = aci.AsError(err)
		return nil, nil
	}
	var pick []app
	for _, a := range apps {
		if activePID > 0 && int(a.pid) == activePID {
			pick = []app{a}
			break
		}
	}
	if pick == nil {
		pick = apps
	}
	w := &walker{conn: conn, caps: c.cfg.Caps, roles: &c.roles}
	var names []string
	for _, a := range pick {
		var tops [][]any
		var nameV dbus.Variant
		err := w.calls(wctx, a.ref, []pending{
			{method: ifProperties + ".Get", args: []any{ifAccessible, "Name"}, out: []any{&nameV}},
			{method: ifAccessible + ".GetChildren", out: []any{&tops}},
		})
		name, _ := nameV.Value().(string)
		if err == nil {
			var refs []objRef
			for _, t := range tops {
				if r, ok := refOf(t); ok {
					refs = append(refs, r)
				}
			}
			err = w.walk(wctx, refs)
		}
		switch {
		case errors.Is(err, errHung):
			if len(pick) == 1 {
				out.Error = aci.Errorf(aci.CodeTimeout, "a11y: application %q (pid %d) did not answer within %v; the accessibility tree is unavailable until it does", name, a.pid, c.cfg.Caps.CallTimeout)
				out.WalkMS = time.Since(start).Milliseconds()
				return nil, nil
			}
			w.truncate("app_timeout")
		case err != nil && wctx.Err() != nil:
			w.truncate("time")
		case err != nil:
			c.cfg.Logf("a11y: walk %s: %v", a.ref.Bus, err)
		}
		if wctx.Err() != nil {
			w.truncate("time")
			break
		}
		if name != "" {
			names = append(names, name)
		}
	}
	appName := fmt.Sprint(len(pick), " applications")
	if len(names) == 1 && len(pick) == 1 {
		appName = names[0]
	}
	cur := render(c.ids, appName, w.nodes, w.trunc)
	out.Nodes = len(w.nodes)
	out.WalkMS = time.Since(start).Milliseconds()
	out.App, out.Window, out.Focus = cur.app, cur.window, cur.focus
	out.Truncated, out.TruncatedBy = cur.truncated != "", cur.truncated
	return cur, nil
}
