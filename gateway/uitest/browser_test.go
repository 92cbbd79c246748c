package uitest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

// TestMain shares one Redis container among the tests (each uses its own key prefix).
func TestMain(m *testing.M) { redistest.Main(m) }

// chromiumPath is Debian's chromium, or whatever VIGIL_CHROMIUM names.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("VIGIL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium found: install it with `apt-get install -y chromium` (or set VIGIL_CHROMIUM)")
	return ""
}

// newBrowser starts a headless Chromium for this test (with extra flags, if any) and closes it
// when the test ends.
func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("disable-background-media-suspend", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	return bctx
}

// page is one person's tab, in a browser context of its own (its own storage), so a leader
// and a viewer are two different people.
type page struct {
	t    *testing.T
	name string
	ctx  context.Context

	mu     sync.Mutex
	errors []string
	// net is what the browser said about this tab's requests that did not load (a network
	// error, a log entry), for a failed wait's message.
	net  []string
	urls map[network.RequestID]string
}

func newPage(t *testing.T, browser context.Context, name string) *page {
	t.Helper()
	p := &page{t: t, name: name, urls: map[network.RequestID]string{}}
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext(), chromedp.WithListener(func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			p.mu.Lock()
			p.urls[e.RequestID] = e.Request.URL
			p.mu.Unlock()
			return
		case *network.EventLoadingFailed:
			p.mu.Lock()
			p.net = append(p.net, fmt.Sprintf("%s failed: %s (canceled %v, blocked %q)", p.urls[e.RequestID], e.ErrorText, e.Canceled, e.BlockedReason))
			p.mu.Unlock()
			return
		case *cdplog.EventEntryAdded:
			p.mu.Lock()
			p.net = append(p.net, fmt.Sprintf("log %s %s: %s %s", e.Entry.Source, e.Entry.Level, e.Entry.Text, e.Entry.URL))
			p.mu.Unlock()
			return
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg = fmt.Sprintf("%s at %s:%d", d.Text, d.URL, d.LineNumber+1)
			if d.Exception != nil {
				msg += ": " + d.Exception.Description
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type != runtime.ConsoleAPICalledTypeError {
				return
			}
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, a.Description+string(a.Value))
			}
			msg = "console.error: " + strings.Join(parts, " ")
		default:
			return
		}
		p.mu.Lock()
		p.errors = append(p.errors, msg)
		p.mu.Unlock()
	}))
	p.ctx = ctx
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("%s: open tab: %v", name, err)
	}
	// Anything the Content-Security-Policy blocks is a bug in the pages: report it as an error.
	if _, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{
		Source: `document.addEventListener('securitypolicyviolation', e => console.error('CSP blocked ' + e.blockedURI + ' (' + e.violatedDirective + ')'))`,
	}); err != nil {
		t.Fatalf("%s: watch for CSP violations: %v", name, err)
	}
	if _, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: socketLogJS}); err != nil {
		t.Fatalf("%s: watch the page's sockets: %v", name, err)
	}
	t.Cleanup(func() {
		p.mu.Lock()
		errs := p.errors
		p.mu.Unlock()
		for _, e := range errs {
			t.Errorf("%s: page error: %s", name, e)
		}
		cancel()
	})
	return p
}

// socketLogJS records every WebSocket the page opens, with when (ms since the page's start) it
// was made, opened and closed (and its close code), and every fetch with when it was made and
// answered, so a failed wait can say which of its sockets never got past CONNECTING and which
// request it still waits for.
const socketLogJS = `(() => {
	const log = window.vigilSockets = [];
	const now = () => Math.round(performance.now());
	window.WebSocket = class extends window.WebSocket {
		constructor(url, protocols) {
			super(url, protocols);
			const e = {url: String(url).replace(/token=[^&]*/, 'token=…'), made: now()};
			log.push(e);
			this.addEventListener('open', () => { e.opened = now(); });
			this.addEventListener('close', (ev) => { e.closed = now(); e.code = ev.code; });
		}
	};
	const fetches = window.vigilFetches = [];
	const fetch = window.fetch;
	window.fetch = (input, init) => {
		const e = {url: String(input && input.url || input), made: now()};
		fetches.push(e);
		const p = fetch(input, init);
		p.then((res) => { e.done = now(); e.status = res.status; }, (err) => { e.failed = now(); e.err = String(err); });
		return p;
	};
})()`

// sockets describes the page's WebSockets (socketLogJS), the resources it has loaded (path,
// start+duration in ms) and its clock, for a failure message.
func (p *page) sockets() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({now: Math.round(performance.now()), readyState: document.readyState,
		sockets: window.vigilSockets, fetches: window.vigilFetches, script: typeof window.vigilRoom, loaded: performance.getEntriesByType('resource').map(e => e.name.replace(/^.*\/\/[^/]*/, '') + ' ' + Math.round(e.startTime) + '+' + Math.round(e.duration))})`))
	if err != nil {
		s = err.Error()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return s + "; the browser said: " + strings.Join(p.net, " | ")
}

// run runs browser actions, failing the test on error.
func (p *page) run(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
}

// clickSettled clicks the element with id once it has stopped moving: a page that has just
// loaded still lays itself out (a status line fills, a hidden button shows), and a mouse
// click aimed at where the element was lands on its neighbour. Stopped is the same box in 8
// looks in a row (waitFor looks every 20 ms or more).
func (p *page) clickSettled(id string) {
	p.t.Helper()
	p.waitFor(id+" stopped moving", `(() => { const b = JSON.stringify(document.getElementById(`+jsString(id)+`).getBoundingClientRect());
		window.settleSame = window.settleBox === b ? (window.settleSame || 0) + 1 : 0; window.settleBox = b; return window.settleSame >= 8; })()`, 10*time.Second)
	p.run(chromedp.Click(chromedp.ID(id)))
}

// open navigates to url and waits for the page's script to have run.
func (p *page) open(url string) {
	p.t.Helper()
	p.run(chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body")))
}

// eval evaluates a JavaScript expression into out (a pointer).
func (p *page) eval(expr string, out any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr))
	if err != nil {
		p.t.Fatalf("%s: evaluate %s: %v", p.name, expr, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		p.t.Fatalf("%s: evaluate %s: decode %s: %v", p.name, expr, raw, err)
	}
}

// waitFor waits until the JavaScript expression is truthy; what describes it in the failure.
// It evaluates the expression again and again rather than in one in-page poll, so it keeps
// working across a navigation.
func (p *page) waitFor(what, expr string, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	check := `!!(` + expr + `)`
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](check))
		cancel()
		if err == nil && ok {
			if d := time.Until(deadline); within-d > 2*time.Second {
				p.t.Logf("%s: %s took %v", p.name, what, (within - d).Round(time.Millisecond))
			}
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the condition, bounded by the deadline
	}
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('[role=status], [role=alert]'), e => e.textContent.trim()).filter(Boolean).join(' | ')`))
	p.t.Fatalf("%s: %s: not true within %v (last error: %v); the page says: %s; its sockets: %s", p.name, what, within, lastErr, status, p.sockets())
}

// screenshot saves the page as docs/screenshots/<name>.png when VIGIL_SCREENSHOTS is set.
func (p *page) screenshot(name string) {
	p.t.Helper()
	dir := os.Getenv("VIGIL_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("%s: screenshot: %v", p.name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		p.t.Fatalf("save screenshot: %v", err)
	}
}

// screenshotViewport saves what the screen shows (not the whole page) as
// docs/screenshots/<name>.png when VIGIL_SCREENSHOTS is set: for something laid over the page.
func (p *page) screenshotViewport(name string) {
	p.t.Helper()
	dir := os.Getenv("VIGIL_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("%s: screenshot: %v", p.name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		p.t.Fatalf("save screenshot: %v", err)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// randomName is a unique lowercase name for a chat room.
func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// postJSON sends a JSON request to the gateway and decodes the answer into out (when not nil).
func postJSON(t *testing.T, method, url string, body, out any, wantCode int) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != wantCode {
		t.Fatalf("%s %s = %d %s, want %d", method, url, res.StatusCode, raw, wantCode)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, url, raw, err)
		}
	}
}

// testVideo makes a 30 s, 320x240 VP8 WebM with a frame counter burnt in (ffmpeg's testsrc),
// small enough to make in well under a second.
func testVideo(t *testing.T) string {
	t.Helper()
	return makeVideo(t, "practice", 30)
}

// makeVideo makes <name>.webm, seconds long, like testVideo.
func makeVideo(t *testing.T, name string, seconds int) string {
	t.Helper()
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Fatal("no ffmpeg found: install it with `apt-get install -y ffmpeg`")
	}
	out := filepath.Join(t.TempDir(), name+".webm")
	cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-f", "lavfi",
		"-i", fmt.Sprintf("testsrc=size=320x240:rate=15:duration=%d", seconds),
		"-c:v", "libvpx", "-b:v", "200k", "-g", "15", "-an", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, b)
	}
	return out
}

// messagesJS lists the chat messages a page shows, as [{id, user, body}].
const messagesJS = `Array.from(document.querySelectorAll('ol.messages li'), li => ({
	id: Number(li.dataset.id), user: li.querySelector('.who').textContent, body: li.querySelector('.body').textContent}))`

type shownMessage struct {
	ID   int64  `json:"id"`
	User string `json:"user"`
	Body string `json:"body"`
}

// messages reads the chat messages a page shows, failing on a repeated or out-of-order id.
func (p *page) messages() []shownMessage {
	p.t.Helper()
	var ms []shownMessage
	p.eval(messagesJS, &ms)
	for i := 1; i < len(ms); i++ {
		if ms[i].ID <= ms[i-1].ID {
			p.t.Fatalf("%s: message ids not increasing: %+v", p.name, ms)
		}
	}
	return ms
}

// waitForMessage waits until the page shows a message with this body.
func (p *page) waitForMessage(body string) {
	p.t.Helper()
	p.waitFor(fmt.Sprintf("message %q shown", body),
		`Array.from(document.querySelectorAll('ol.messages li .body')).some(e => e.textContent === `+jsString(body)+`)`, 10*time.Second)
}

// unlabelledJS lists the visible form controls and links that have no accessible name.
const unlabelledJS = `Array.from(document.querySelectorAll('input, button, select, textarea, a[href]'))
	.filter(e => !e.closest('[hidden]') && e.type !== 'hidden')
	.filter(e => !((e.labels && e.labels.length && e.labels[0].textContent.trim()) || e.getAttribute('aria-label') || (e.tagName !== 'INPUT' && e.textContent.trim())))
	.map(e => e.id || e.outerHTML.slice(0, 80))`

// checkPlain checks what the issue asks of every page: each control has a name a screen
// reader can say, and the page fits a phone-sized screen without sideways scrolling. shot,
// when not empty, names a phone-sized screenshot.
func (p *page) checkPlain(shot string) {
	p.t.Helper()
	var unlabelled []string
	p.eval(unlabelledJS, &unlabelled)
	if len(unlabelled) > 0 {
		p.t.Errorf("%s: controls without an accessible name: %v", p.name, unlabelled)
	}
	p.run(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	defer p.run(chromedp.EmulateViewport(1280, 900))
	p.waitFor("laid out for a phone", `window.innerWidth === 390`, 5*time.Second)
	var overflow struct {
		Scroll int `json:"scroll"`
		Inner  int `json:"inner"`
	}
	p.eval(`({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})`, &overflow)
	if overflow.Scroll > overflow.Inner {
		p.t.Errorf("%s: on a 390 px wide screen the page is %d px wide: it scrolls sideways", p.name, overflow.Scroll)
	}
	if shot != "" {
		p.screenshot(shot)
	}
}

// close closes the tab, as a person leaving does.
func (p *page) close() {
	p.t.Helper()
	if err := chromedp.Cancel(p.ctx); err != nil {
		p.t.Fatalf("%s: close tab: %v", p.name, err)
	}
}
