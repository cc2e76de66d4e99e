package guest

import (
	"context"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Settling on Chromium's frames (docs/architecture.md, "Observation
// fidelity").
//
// Chromium never looks idle to the quiescence reads (quiesce.go): each of
// its processes keeps a hang watcher and short timers. Its steps would wait
// out the damage windows: 200 ms for a first change, 300 ms of quiet after
// one. Yet Chromium can say when it is done, and guestd holds its DevTools
// pipe. After an action into Chromium's window, the settle asks the tab for
// two animation frames. Blink dispatches the input that reached a page
// before a frame at that frame's start, ahead of its animation-frame
// callbacks; when the second callback runs, the frame that shows the
// input's effect has been painted and handed to the compositor, which puts
// it on the screen within a display frame. The browser's own widgets (the
// address bar, menus) draw on the same frames. So once the tab answers, the
// settle waits only frameQuiet past the later of that answer and the last
// damage (info.settle.frame).
//
// The answer shortens nothing when:
//   - the active window is not Chromium's (another app's drawing is not on
//     Chromium's frames);
//   - a frame of the tab is loading (a click that navigates): the new page
//     comes later, and the browser's status bubble ("Waiting for ...")
//     hides on a timer of its own after the load. A load also holds the
//     settle until it stops (or the ceiling), whether it started before the
//     answer or after it; then the damage windows decide;
//   - the link under the pointer changed since the last answer: the status
//     bubble shows a hovered link's address, and hides it, on delays of its
//     own;
//   - the page runs animations (CSS animations and transitions, Web
//     Animations): their frames come after the answer;
//   - the tab does not answer within frameWait (a hidden tab gets no
//     frames: the agent opened another one).
//
// Then the damage windows decide, as for any app. Chromium starts with
// smooth scrolling off (browser.go), so a wheel step is one frame, not an
// animation the answer would not see.

// frameQuiet is how long after the tab's answer (or the last damage after
// it) the settle waits for more drawing: a display frame and margin.
const frameQuiet = 40 * time.Millisecond

// frameWait bounds the wait for the tab's answer: a visible tab answers
// within two display frames of the renderer being free.
const frameWait = 500 * time.Millisecond

// twoFrames resolves on the second animation frame from now: whether the
// page runs animations then, and the link under the pointer (what the
// browser's status bubble shows, on its own delays).
const twoFrames = `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => {
	const h = document.querySelectorAll(":hover"), a = h.length ? h[h.length - 1].closest("a[href]") : null;
	r({a: document.getAnimations().some(a => a.playState === "running"), l: a ? a.href : ""});
})))`

// loadState follows which frames of the tab are loading, from the Page
// domain's events (chromedp enables the domain on attach).
type loadState struct {
	mu      sync.Mutex
	loading map[cdp.FrameID]bool
	wake    chan struct{} // closed and replaced whenever loading changes
	// link is the link under the pointer at the last answer, when known.
	link      string
	linkKnown bool
}

func (l *loadState) listen(ev any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch e := ev.(type) {
	case *page.EventFrameStartedLoading:
		if len(l.loading) < 256 { // a page spawning frames forever stays loading
			l.loading[e.FrameID] = true
		}
	case *page.EventFrameStoppedLoading:
		delete(l.loading, e.FrameID)
	case *page.EventFrameDetached:
		delete(l.loading, e.FrameID)
	default:
		return
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// followLoads starts following the tab's loads (once, after attach).
func (bc *browserConn) followLoads() {
	bc.loads = &loadState{loading: map[cdp.FrameID]bool{}, wake: make(chan struct{})}
	if chromedp.Listen(bc.ctx, bc.loads.listen) != nil {
		bc.loads = nil // no events: the settle never trusts the tab
	}
}

// browserNews is what the browser says during a settle.
type browserNews struct {
	at time.Time
	// frame: the tab drew the frame after the action, and nothing it knows
	// of draws later: the settle may end frameQuiet after at.
	frame bool
	// loading: a frame of the tab loads (a navigation the action started);
	// the settle does not end before news that it stopped (loading false),
	// and then the damage windows decide.
	loading bool
}

// frameSignal starts asking the browser for the frame after the action
// when the active window is Chromium's, and returns the channel its news
// comes on (nil when there is none to ask). It never waits past deadline;
// cancel ctx to stop it.
func (s *Server) frameSignal(ctx context.Context, deadline time.Time) <-chan browserNews {
	s.browser.mu.Lock()
	bc := s.browser.conn
	s.browser.mu.Unlock()
	if bc == nil {
		return nil
	}
	select {
	case <-bc.ready:
		if bc.initErr != nil || bc.loads == nil {
			return nil
		}
	default:
		return nil
	}
	if s.x.activePID(ctx) != bc.pid {
		bc.forgetLink()
		return nil
	}
	out := make(chan browserNews, 1)
	go func() {
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		bc.news(ctx, out)
	}()
	return out
}

// news asks the tab for two animation frames, sends whether the settle may
// end on them, and then follows the tab's loads until ctx ends: a load that
// starts after the answer (the action's navigation, late) holds the settle
// too.
func (bc *browserConn) news(ctx context.Context, out chan<- browserNews) {
	send := func(n browserNews) bool {
		select {
		case out <- n:
			return true
		case <-ctx.Done():
			return false
		}
	}
	wctx, cancel := context.WithTimeout(ctx, frameWait)
	f, err := bc.evalFrames(wctx)
	cancel()
	l := bc.loads
	l.mu.Lock()
	loading := len(l.loading) > 0
	moved := err != nil || !l.linkKnown || l.link != f.Link
	l.link, l.linkKnown = f.Link, err == nil
	l.mu.Unlock()
	if err == nil && !f.Animating && !loading && !moved && !send(browserNews{at: time.Now(), frame: true}) {
		return
	}
	was := false
	for {
		l.mu.Lock()
		loading, wake := len(l.loading) > 0, l.wake
		l.mu.Unlock()
		if loading != was {
			if !send(browserNews{at: time.Now(), loading: loading}) {
				return
			}
			was = loading
		}
		select {
		case <-wake:
		case <-bc.exited:
			return
		case <-ctx.Done():
			return
		}
	}
}

// forgetLink makes the next answer count the link under the pointer as
// changed: a step the tab did not answer for may have moved the pointer.
func (bc *browserConn) forgetLink() {
	bc.loads.mu.Lock()
	bc.loads.linkKnown = false
	bc.loads.mu.Unlock()
}

// frameAnswer is twoFrames' answer.
type frameAnswer struct {
	Animating bool   `json:"a"`
	Link      string `json:"l"`
}

// evalFrames runs twoFrames in the tab.
func (bc *browserConn) evalFrames(ctx context.Context) (frameAnswer, error) {
	rctx, cancel := boundedCtx(bc.ctx, ctx)
	defer cancel()
	return chromedp.Run(rctx, chromedp.Evaluate[frameAnswer](twoFrames, chromedp.EvalAwaitPromise, chromedp.EvalIgnoreExceptions))
}
