package guest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

// The browser (docs/architecture.md, "The browser"): launch_app of
// chromium starts Debian's Chromium with the sandbox's flags and a
// DevTools connection over a pipe that only guestd holds
// (--remote-debugging-pipe: no debugging port on the loopback for the
// agent to take). Setup opens pages through it and waits for them to
// load; before scoring it can close the browser gracefully so that what
// Chromium writes lazily (history, bookmarks, preferences) is on disk.

// browserNames are the app names that start Chromium.
var browserNames = map[string]bool{"chromium": true, "chromium-browser": true}

// chromiumFlags are the flags every sandboxed Chromium starts with, for a
// w×h screen whose web host listens on webAddr.
//
//   - --no-sandbox: Chromium's own sandbox needs user namespaces or a setuid
//     helper, both refused inside a sandbox (the seccomp filter denies new
//     namespaces). Its renderers then run as the agent, which the agent
//     already is: the sandbox around the whole desktop is the boundary.
//     --test-type hides the warning bar that flag would show.
//   - no GPU, no first run, no default-browser check, no crash or restore
//     bubbles, no background networking, sync, updates or translation: a
//     sandbox has no network beyond its loopback and every episode starts
//     from the same screen.
//   - no on-device AI models (the OnDeviceModelService and the built-in AI
//     APIs): Chromium 156 started model-service utility processes in every
//     browser, dozens at once under the test suite, and the web apps' pages
//     drew late or black beside them.
//   - --force-renderer-accessibility: the accessibility tree (observe.a11y).
//   - --disable-smooth-scrolling: a wheel step scrolls in one frame, which
//     the settle on Chromium's frames sees (browser_settle.go).
//   - *.test resolves to the web host (web.go).
func chromiumFlags(w, h int, webAddr string) []string {
	flags := []string{
		"--no-sandbox", "--test-type", "--no-first-run", "--no-default-browser-check",
		"--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-breakpad",
		"--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider,InterestFeedContentSuggestions,AutofillServerCommunication,OptimizationGuideOnDeviceModel,OnDeviceModelService,AIPromptAPI,AISummarizationAPI,AIWriterAPI,AIRewriterAPI,AIProofreadingAPI,AILanguageDetectionAPI,TranslationAPI",
		"--disable-session-crashed-bubble", "--hide-crash-restore-bubble", "--noerrdialogs",
		"--password-store=basic", "--force-device-scale-factor=1", "--lang=en-US",
		"--force-renderer-accessibility", "--remote-debugging-pipe", "--disable-smooth-scrolling",
		"--ozone-platform=x11", "--window-position=0,0",
	}
	if w > 0 && h > 0 {
		flags = append(flags, "--window-size="+strconv.Itoa(w)+","+strconv.Itoa(h), "--start-maximized")
	}
	if webAddr != "" {
		flags = append(flags, "--host-resolver-rules=MAP *.test "+webAddr+", EXCLUDE localhost")
	}
	return flags
}

// dropSingleton removes the profile lock of an earlier Chromium, then
// execs Chromium ($0) with its arguments.
const dropSingleton = `p="${XDG_CONFIG_HOME:-$HOME/.config}/chromium"; rm -f "$p/SingletonLock" "$p/SingletonSocket" "$p/SingletonCookie"; exec "$0" "$@"`

// browserConn is guestd's DevTools connection to the running Chromium.
type browserConn struct {
	pid    int
	exited <-chan struct{}
	// root is chromedp's first context, which owns the browser (its
	// Cancel closes Chromium gracefully); ctx is the tab setup drives,
	// set once ready closes.
	root   context.Context
	ctx    context.Context
	cancel context.CancelFunc
	// ready closes once chromedp is attached to the first tab; initErr
	// then says whether it could.
	ready   chan struct{}
	initErr error
	// loads follows the tab's loading frames (browser_settle.go), set
	// before ready closes.
	loads *loadState
}

// attached waits until bc is attached to Chromium's first tab.
func (bc *browserConn) attached(ctx context.Context) error {
	select {
	case <-bc.ready:
		if bc.initErr != nil {
			return aci.Errorf(aci.CodeInternal, "browser: DevTools: %v", bc.initErr)
		}
		return nil
	case <-bc.exited:
		return aci.Errorf(aci.CodeInvalidAction, "browser: Chromium exited")
	case <-ctx.Done():
		return aci.Errorf(aci.CodeTimeout, "browser: Chromium's DevTools did not answer: %v", ctx.Err())
	}
}

// browserState holds the connection to the one browser a sandbox runs.
type browserState struct {
	mu   sync.Mutex
	conn *browserConn
}

// attachTab attaches chromedp to Chromium's first tab through root, the
// browser's first context. A tab that navigates while chromedp attaches
// (Chromium's own start page) fails that attach; the page target that is
// there then is attached instead, by id and kept open on cancel, up to
// three times.
func attachTab(root context.Context) (context.Context, error) {
	err := chromedp.Do(root)
	if err == nil {
		return root, nil
	}
	for try := 0; try < 3; try++ {
		select {
		case <-root.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
		infos, terr := chromedp.Targets(root)
		if terr != nil {
			err = terr
			continue
		}
		for _, in := range infos {
			if in.Type != "page" {
				continue
			}
			tab, _ := chromedp.NewContext(root, chromedp.WithTargetID(in.TargetID), chromedp.WithDetachOnCancel())
			if err = chromedp.Do(tab); err == nil {
				return tab, nil // its cancel is root's: tab lives as long as the browser
			}
			break
		}
	}
	return nil, err
}

// maxDevToolsMessage bounds one message read from Chromium's DevTools pipe.
// guestd asks for small answers (a page's load, two frames); the agent, who
// runs as Chromium's user, can open the pipe through /proc and write to it
// what it likes, and chromedp reads a message up to its terminating zero
// byte however long it is.
const maxDevToolsMessage = 8 << 20

// errDevToolsMessage ends the DevTools connection on a message past the
// bound: the browser is then gone for guestd (its pipe closes and Chromium
// exits), the agent's own loss.
var errDevToolsMessage = errors.New("browser: a DevTools message exceeds 8 MiB")

// boundedMessages reads the DevTools pipe and fails once the bytes since the
// last zero byte (one message) pass max.
type boundedMessages struct {
	r   io.ReadCloser
	max int
	n   int // bytes of the current message so far
}

func (b *boundedMessages) Read(p []byte) (int, error) {
	if b.n > b.max {
		return 0, errDevToolsMessage
	}
	k, err := b.r.Read(p)
	if i := bytes.LastIndexByte(p[:k], 0); i >= 0 {
		b.n = k - i - 1
	} else {
		b.n += k
	}
	if b.n > b.max {
		return 0, errDevToolsMessage
	}
	return k, err
}

func (b *boundedMessages) Close() error { return b.r.Close() }

// pipeAllocator hands chromedp the browser at the other end of a pipe that
// guestd started it with.
type pipeAllocator struct{ conn *chromedp.PipeConn }

func (a pipeAllocator) Allocate(ctx context.Context, opts ...chromedp.BrowserOption) (*chromedp.Browser, error) {
	return chromedp.NewBrowserTransport(ctx, a.conn, opts...)
}

func (a pipeAllocator) Wait() {}

// browserWait bounds a browser call when the caller sets none.
const browserWait = 20 * time.Second

// op is the browser method: open pages (and wait for each to load),
// or close the browser gracefully.
func (b *browserState) op(ctx context.Context, a wire.BrowserArgs) (*wire.BrowserResult, error) {
	timeout := browserWait
	if a.TimeoutMS > 0 {
		timeout = min(time.Duration(a.TimeoutMS)*time.Millisecond, maxExecTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b.mu.Lock()
	bc := b.conn
	b.mu.Unlock()
	if bc != nil {
		if err := bc.attached(ctx); err != nil {
			return nil, err
		}
	}
	switch {
	case a.Close:
		if bc == nil {
			return &wire.BrowserResult{}, nil // no browser: nothing to write
		}
		// chromedp's Cancel of the first tab's context sends Browser.close
		// and waits; Chromium may hang, so the wait is ours.
		errc := make(chan error, 1)
		go func() { errc <- chromedp.Cancel(bc.root) }()
		var err error
		select {
		case <-bc.exited:
			return &wire.BrowserResult{Closed: true}, nil
		case err = <-errc:
			select {
			case <-bc.exited:
				return &wire.BrowserResult{Closed: true}, nil
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
		return nil, aci.Errorf(aci.CodeTimeout, "browser: close: Chromium did not exit within %v (%v)", timeout, err)
	case len(a.Open) > 0:
		if bc == nil {
			return nil, aci.Errorf(aci.CodeInvalidAction, "browser: no browser runs (launch chromium first)")
		}
		if err := navigate(ctx, bc.ctx, a.Open[0]); err != nil {
			return nil, aci.Errorf(aci.CodeInternal, "browser: open %s: %v", a.Open[0], err)
		}
		for _, u := range a.Open[1:] {
			tctx, tcancel := chromedp.NewContext(bc.ctx, chromedp.WithDetachOnCancel())
			err := navigate(ctx, tctx, u)
			tcancel()
			if err != nil {
				return nil, aci.Errorf(aci.CodeInternal, "browser: open %s: %v", u, err)
			}
		}
		return &wire.BrowserResult{Opened: len(a.Open)}, nil
	}
	return nil, aci.Errorf(aci.CodeBadRequest, "browser: need open or close")
}

// navigate loads u in tab (a chromedp context) under ctx's deadline. A
// navigation that another one aborted or overtook (the tab's own start
// page still loading, a restored tab) is tried again, up to three times:
// the page the task opens is what the episode must start on.
func navigate(ctx, tab context.Context, u string) error {
	var err error
	for try := 0; try < 3; try++ {
		rctx, cancel := boundedCtx(tab, ctx)
		err = chromedp.Do(rctx, chromedp.Navigate(u))
		cancel()
		if err == nil || !(strings.Contains(err.Error(), "ERR_ABORTED") || strings.Contains(err.Error(), "navigated or closed")) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// boundedCtx is base (which carries chromedp's context) bounded by ctx's
// deadline and cancellation.
func boundedCtx(base, ctx context.Context) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(base)
	stop := context.AfterFunc(ctx, cancel)
	if d, ok := ctx.Deadline(); ok {
		var dcancel context.CancelFunc
		out, dcancel = context.WithDeadline(out, d)
		return out, func() { stop(); dcancel(); cancel() }
	}
	return out, func() { stop(); cancel() }
}

// isBrowser reports whether app starts Chromium.
func isBrowser(app string) bool { return browserNames[filepath.Base(app)] }

// browserExports are the files of the agent's Chromium profile a verifier
// may read: Chromium keeps its profile private to its user (0700, files
// 0600), so the verifier's uid could not read them itself.
var browserExports = []string{"Bookmarks", "Preferences"}

// exportBrowser copies the browser's exported files from the agent's
// profile under agentHome into dir, the verifier's, owned by id, and
// returns how many it copied. Each is read as the check mode reads an
// agent's file (verifylib.go: a regular file, no link followed anywhere
// below the home, bounded, never blocking), with guestd's rights; a file
// that fails that is left out, so the verifier finds it missing.
func exportBrowser(agentHome, dir string, id *Identity) (int, error) {
	profile := filepath.Join(agentHome, ".config", "chromium", "Default")
	n := 0
	for _, name := range browserExports {
		var out, errb bytes.Buffer
		if Check([]string{"read", filepath.Join(profile, name)}, agentHome, &out, &errb) != CheckOK {
			continue
		}
		if err := handOver(dir, name, out.Bytes(), id); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}
