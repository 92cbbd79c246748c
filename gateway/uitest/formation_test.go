package uitest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// formation is the formation shape the pages write (docs/LOBBY.md).
type formation struct {
	Grid struct {
		Cols int `json:"cols"`
		Rows int `json:"rows"`
	} `json:"grid"`
	Dancers []dancer `json:"dancers"`
}

type dancer struct {
	Name string `json:"name"`
	X    int    `json:"x"`
	Y    int    `json:"y"`
}

// openRoom creates a practice room through the REST API and returns its code and leader token.
func openRoom(t *testing.T, s *stack, name, title string, durationMs int) (code, token string) {
	t.Helper()
	var created struct {
		Code        string `json:"code"`
		LeaderToken string `json:"leaderToken"`
	}
	postJSON(t, "POST", s.gateway.URL+"/lobby/rooms", map[string]any{"name": name, "video": map[string]any{"title": title, "durationMs": durationMs}}, &created, 201)
	return created.Code, created.LeaderToken
}

// openAsLeader gives the page's browser profile the room's leader token (as the lobby's form
// does) and opens the room.
func (p *page) openAsLeader(s *stack, code, token string) {
	p.t.Helper()
	p.open(s.url + "/ui/chat.html")
	p.eval(`localStorage.setItem('vigil.leader.'+`+jsString(code)+`, `+jsString(token)+`); true`, new(bool))
	p.open(s.url + "/ui/room.html?code=" + code)
	p.waitFor("connected as the leader", `document.getElementById('conn').textContent.includes('leading')`, 10*time.Second)
}

// dancersJS lists the dancers a page's stage shows, from the tags on the stage, as
// [{name, x, y}] sorted by name.
const dancersJS = `Array.from(document.querySelectorAll('#stage .dancer'), e => ({name: e.dataset.name, x: Number(e.dataset.x), y: Number(e.dataset.y)}))
	.sort((a, b) => a.name < b.name ? -1 : 1)`

// showsDancers is a JavaScript condition: the stage shows exactly these dancers, each placed
// on its cell of the drawn grid (the front row, y = 1, is the bottom one).
func showsDancers(ds ...dancer) string {
	want, _ := json.Marshal(ds)
	return `(() => { const want = ` + string(want) + `; const got = ` + dancersJS + `;
		const rows = Number(getComputedStyle(document.getElementById('stage')).getPropertyValue('--rows'));
		const placed = Array.from(document.querySelectorAll('#stage .dancer')).every(e =>
			e.style.gridColumn.split(' ')[0] === e.dataset.x && Number(e.style.gridRow.split(' ')[0]) === rows - Number(e.dataset.y) + 1);
		return placed && JSON.stringify(got) === JSON.stringify(want.sort((a, b) => a.name < b.name ? -1 : 1)); })()`
}

// cellCenter is the centre, in viewport pixels, of a cell of the page's stage, after scrolling
// the stage into view; from is the centre of the named dancer's tag.
func (p *page) cellCenter(name string, x, y int) (from, to [2]float64) {
	p.t.Helper()
	var r struct {
		From [2]float64 `json:"from"`
		To   [2]float64 `json:"to"`
	}
	p.eval(fmt.Sprintf(`(() => { const st = document.getElementById('stage'); st.scrollIntoView({block: 'center'});
		const f = window.vigilRoom.room.formation, s = st.getBoundingClientRect();
		const d = document.querySelector('#stage .dancer[data-name=' + CSS.escape(%s) + ']').getBoundingClientRect();
		return {from: [d.left + d.width / 2, d.top + d.height / 2],
			to: [s.left + (%d - 0.5) * s.width / f.grid.cols, s.top + (f.grid.rows - %d + 0.5) * s.height / f.grid.rows]}; })()`,
		jsString(name), x, y), &r)
	return r.From, r.To
}

// mouseDrag drags the named dancer to column x, row y with the mouse: press, move in steps,
// release, as a hand does.
func (p *page) mouseDrag(name string, x, y int) {
	p.t.Helper()
	from, to := p.cellCenter(name, x, y)
	acts := []chromedp.Action[chromedp.Void]{chromedp.MouseEvent(chromedp.MouseMoved, from[0], from[1])}
	acts = append(acts, chromedp.MouseEvent(chromedp.MousePressed, from[0], from[1], chromedp.ButtonLeft, chromedp.ClickCount(1)))
	for i := 1; i <= 8; i++ {
		f := float64(i) / 8
		acts = append(acts, chromedp.MouseEvent(chromedp.MouseMoved, from[0]+(to[0]-from[0])*f, from[1]+(to[1]-from[1])*f, chromedp.ButtonLeft))
	}
	acts = append(acts, chromedp.MouseEvent(chromedp.MouseReleased, to[0], to[1], chromedp.ButtonLeft, chromedp.ClickCount(1)))
	p.run(acts...)
}

// touchDrag drags the named dancer to column x, row y with a finger (the page must run with
// touch emulation on).
func (p *page) touchDrag(name string, x, y int) {
	p.t.Helper()
	from, to := p.cellCenter(name, x, y)
	touch := func(typ input.DispatchTouchEventType, pts ...[2]float64) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			tps := []*input.TouchPoint{}
			for _, pt := range pts {
				id, r := 0.0, 1.0
				tps = append(tps, &input.TouchPoint{X: pt[0], Y: pt[1], RadiusX: &r, RadiusY: &r, Force: &r, ID: &id})
			}
			_, err := cdp.Call(ctx, t, input.DispatchTouchEvent, input.DispatchTouchEventParams{Type: typ, TouchPoints: tps})
			return err
		})
	}
	acts := []chromedp.Action[chromedp.Void]{touch(input.DispatchTouchEventTypeTouchStart, from)}
	for i := 1; i <= 8; i++ {
		f := float64(i) / 8
		acts = append(acts, touch(input.DispatchTouchEventTypeTouchMove, [2]float64{from[0] + (to[0]-from[0])*f, from[1] + (to[1]-from[1])*f}))
	}
	acts = append(acts, touch(input.DispatchTouchEventTypeTouchEnd))
	p.run(acts...)
}

// TestFormation: the leader sets a formation by typing, with the mouse, with a finger and with
// the arrow keys; a viewer sees every change live; bad input gets a sentence and sends
// nothing; a viewer who joins later sees the saved formation, in the documented shape.
func TestFormation(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	browser := newBrowser(t)
	code, token := openRoom(t, s, "Formation practice", "Routine", 60000)

	leader := newPage(t, browser, "leader")
	leader.openAsLeader(s, code, token)
	leader.waitFor("empty stage to edit", `!document.getElementById('formation-editor').hidden && document.getElementById('formation-status').textContent.startsWith('No formation yet') && !!document.getElementById('stage')`, 5*time.Second)

	viewer := newPage(t, browser, "viewer")
	viewer.open(s.url + "/ui/room.html?code=" + code)
	viewer.waitFor("connected as a viewer", `document.getElementById('conn').textContent.includes('following')`, 10*time.Second)
	viewer.waitFor("no formation yet", `document.getElementById('formation-status').textContent === 'No formation yet.' && document.getElementById('formation-editor').hidden`, 5*time.Second)

	// Typed: a name and a spot, with the keyboard only; then a name alone takes the first
	// free spot (front row, from the left).
	leader.run(
		chromedp.SendKeys(chromedp.ID("dancer-name"), "Ann"),
		chromedp.SendKeys(chromedp.ID("dancer-x"), "2"),
		chromedp.SendKeys(chromedp.ID("dancer-y"), "3"+kb.Enter),
	)
	viewer.waitFor("Ann shown live", showsDancers(dancer{"Ann", 2, 3}), 10*time.Second)
	leader.run(chromedp.SendKeys(chromedp.ID("dancer-name"), "Ben"+kb.Enter))
	leader.run(chromedp.SendKeys(chromedp.ID("dancer-name"), "Chloé"+kb.Enter))
	viewer.waitFor("Ben and Chloé on the front row", showsDancers(dancer{"Ann", 2, 3}, dancer{"Ben", 1, 1}, dancer{"Chloé", 2, 1}), 10*time.Second)
	viewer.waitFor("viewer's list says where", `Array.from(document.querySelectorAll('#dancer-list li'), li => li.textContent).join('; ') === 'Ann column 2, row 3; Ben column 1, row 1; Chloé column 2, row 1'`, 5*time.Second)

	// Bad input: each gets a sentence, focus goes to the field to fix, and nothing is sent.
	for _, c := range []struct {
		name, x, y, want, focus string
	}{
		{strings.Repeat("x", 33), "", "", "A dancer's name can be at most 32 characters; this one has 33.", "dancer-name"},
		{"", "1", "1", "Give the dancer a name.", "dancer-name"},
		{"Dee", "9", "1", "Column must be a whole number from 1 to 8.", "dancer-x"},
		{"Dee", "1", "0", "Row must be a whole number from 1 to 6.", "dancer-y"},
		{"Dee", "2", "1", "Column 2, row 1 already has Chloé. Pick a free spot.", "dancer-name"},
	} {
		leader.eval(`['dancer-name', 'dancer-x', 'dancer-y'].forEach(id => document.getElementById(id).value = ''); true`, new(bool))
		leader.run(
			chromedp.SendKeys(chromedp.ID("dancer-name"), c.name),
			chromedp.SendKeys(chromedp.ID("dancer-x"), c.x),
			chromedp.SendKeys(chromedp.ID("dancer-y"), c.y),
			chromedp.Click(chromedp.ID("dancer-place")),
		)
		leader.waitFor("says "+c.want, `document.getElementById('formation-error').textContent === `+jsString(c.want)+` && document.activeElement.id === `+jsString(c.focus), 5*time.Second)
	}
	leader.eval(`['dancer-name', 'dancer-x', 'dancer-y'].forEach(id => document.getElementById(id).value = ''); true`, new(bool))
	// A stage too small for where dancers stand is refused too.
	leader.eval(`document.getElementById('grid-rows').value = '2'; true`, new(bool))
	leader.run(chromedp.Click(chromedp.ID("grid-set")))
	leader.waitFor("resize refused", `document.getElementById('formation-error').textContent === 'Ann stands on column 2, row 3, outside a stage of 8 × 2. Move them first.'`, 5*time.Second)

	// Dragged with the mouse: Ann to the back right corner.
	leader.mouseDrag("Ann", 8, 6)
	viewer.waitFor("Ann dragged, seen live", showsDancers(dancer{"Ann", 8, 6}, dancer{"Ben", 1, 1}, dancer{"Chloé", 2, 1}), 10*time.Second)
	// Dropped on someone else's spot: refused, and the dancer goes back.
	leader.mouseDrag("Ben", 2, 1)
	leader.waitFor("drop on a taken spot refused", `document.getElementById('formation-error').textContent === 'Column 2, row 1 already has Chloé. Pick a free spot.'`, 5*time.Second)
	leader.waitFor("Ben back on his spot", showsDancers(dancer{"Ann", 8, 6}, dancer{"Ben", 1, 1}, dancer{"Chloé", 2, 1}), 5*time.Second)

	// Arrow keys: Ben one row back from the audience, then two to the right.
	leader.run(chromedp.Focus(chromedp.CSS(`#stage .dancer[data-name="Ben"]`)), chromedp.KeyEvent(kb.ArrowUp))
	leader.run(chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowRight))
	viewer.waitFor("Ben moved with the keys", showsDancers(dancer{"Ann", 8, 6}, dancer{"Ben", 3, 2}, dancer{"Chloé", 2, 1}), 10*time.Second)
	var focused string
	leader.eval(`document.activeElement.dataset.name || ''`, &focused)
	if focused != "Ben" {
		t.Errorf("after moving Ben with the keys, focus is on %q, want Ben's tag", focused)
	}
	leader.screenshot("room-formation")

	// A finger, on a phone-sized screen with touch: Chloé to column 5, row 4.
	leader.run(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch))
	leader.waitFor("laid out for a phone", `window.innerWidth === 390`, 5*time.Second)
	leader.touchDrag("Chloé", 5, 4)
	viewer.waitFor("Chloé dragged by touch, seen live", showsDancers(dancer{"Ann", 8, 6}, dancer{"Ben", 3, 2}, dancer{"Chloé", 5, 4}), 10*time.Second)
	leader.run(chromedp.EmulateViewport(1280, 900))
	leader.checkPlain("room-formation-phone")

	// Picking a dancer fills the form; Remove takes them off.
	leader.waitFor("laid out for a desktop again", `window.innerWidth === 1280`, 5*time.Second)
	leader.run(chromedp.Click(chromedp.CSS(`#stage .dancer[data-name="Ben"]`)))
	leader.waitFor("form filled from the stage", `document.getElementById('dancer-name').value === 'Ben' && document.getElementById('dancer-x').value === '3' && document.getElementById('dancer-y').value === '2'`, 5*time.Second)
	leader.run(chromedp.Click(chromedp.ID("dancer-remove")))
	viewer.waitFor("Ben removed, seen live", showsDancers(dancer{"Ann", 8, 6}, dancer{"Chloé", 5, 4}), 10*time.Second)

	// The room keeps it: a viewer who comes later sees it, in the documented shape.
	late := newPage(t, browser, "late viewer")
	late.open(s.url + "/ui/room.html?code=" + code)
	late.waitFor("late viewer sees the formation", showsDancers(dancer{"Ann", 8, 6}, dancer{"Chloé", 5, 4}), 10*time.Second)
	var raw json.RawMessage
	late.eval(`window.vigilRoom.room.formation`, &raw)
	var got formation
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("the saved formation %s is not in the documented shape: %v", raw, err)
	}
	want := formation{Dancers: []dancer{{"Ann", 8, 6}, {"Chloé", 5, 4}}}
	want.Grid.Cols, want.Grid.Rows = 8, 6
	if !reflect.DeepEqual(got, want) {
		t.Errorf("saved formation = %+v, want %+v", got, want)
	}
	late.checkPlain("")
	viewer.screenshot("room-formation-viewer")
}
