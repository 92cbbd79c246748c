package uitest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestPageReloadsAPartThatDidNotLoad: when one of a page's modules fails to load (Chromium
// fails requests in flight when the device's network changes: Docker's interfaces coming and
// going did it to CI's browser), the page says so and loads itself again, instead of staying
// on "Connecting…" with nothing running; once the module loads, the room connects.
func TestPageReloadsAPartThatDidNotLoad(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	browser := newBrowser(t)
	code, _ := openRoom(t, s, "Bachata Friday", "Routine", 60000)

	viewer := newPage(t, browser, "viewer")
	// Every request for one module the room page imports fails, as a network change fails it,
	// until the test has seen the page say so.
	var failing atomic.Bool
	var failed atomic.Int64
	failing.Store(true)
	if err := chromedp.Listen(viewer.ctx, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		go func() { // a listener must not run a command itself
			if failing.Load() {
				failed.Add(1)
				_, _ = chromedp.Call(viewer.ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: e.RequestID, ErrorReason: network.ErrorReasonConnectionReset})
				return
			}
			_, _ = chromedp.Call(viewer.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
		}()
	}); err != nil {
		t.Fatalf("listen for the page's requests: %v", err)
	}
	if _, err := chromedp.Call(viewer.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/ui/room/people.js*"}}}); err != nil {
		t.Fatalf("intercept the page's requests: %v", err)
	}
	viewer.open(s.url + "/ui/room.html?code=" + code)
	viewer.waitFor("the page says a part did not load", `(document.getElementById('boot-failed')?.textContent || '').includes('did not load')`, 10*time.Second)
	if failed.Load() == 0 {
		t.Fatal("no request for room/people.js was failed: the test tested nothing")
	}
	failing.Store(false)
	viewer.waitFor("the page loads again and follows the leader", `typeof window.vigilRoom === 'object' && document.getElementById('conn').textContent.includes('following')`, 15*time.Second)
	var left bool
	viewer.eval(`document.getElementById('boot-failed') === null && sessionStorage.getItem('vigil.bootFailures') === null`, &left)
	if !left {
		t.Error("after loading whole, the page still shows the failure or remembers it")
	}
}
