package uitest

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// barInView is true while the lobby's "Open a room" button is on screen.
const barInView = `(() => { const r = document.getElementById('open-room').getBoundingClientRect();
  return r.top >= 0 && r.bottom <= window.innerHeight && r.width > 0; })()`

// TestLobbyWith500Rooms: the lobby shows the first page of 500 rooms, loads more as the list
// scrolls until all 500 are shown once each, keeps "Open a room" on screen at every scroll,
// finds rooms by name as people type (any case, accents or not), and opens a room from the
// bar's button.
func TestLobbyWith500Rooms(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	for i := range 500 {
		name := fmt.Sprintf("Practice room %d", i)
		switch {
		case i == 123:
			name = "Café Ñandú"
		case i%50 == 7:
			name = fmt.Sprintf("Salsa Tuesday %d", i)
		}
		postJSON(t, "POST", s.gateway.URL+"/lobby/rooms", map[string]any{"name": name, "video": map[string]any{"title": "Routine", "durationMs": 60000}}, nil, 201)
	}
	browser := newBrowser(t)
	p := newPage(t, browser, "lobby")
	p.open(s.url + "/ui/")
	p.waitFor("the first page shown", `document.querySelectorAll('#rooms tbody tr').length >= 50`, 15*time.Second)
	var first int
	p.eval(`document.querySelectorAll('#rooms tbody tr').length`, &first)
	if first >= 500 {
		t.Fatalf("the lobby showed %d rooms at once, want a page", first)
	}
	p.waitFor("open a room in view at the top", barInView, 5*time.Second)

	// Scroll to the end again and again: more pages come, "Open a room" stays on screen.
	for n := 0; ; n++ {
		var count int
		p.eval(`window.scrollTo(0, document.body.scrollHeight); document.querySelectorAll('#rooms tbody tr').length`, &count)
		var inView bool
		p.eval(barInView, &inView)
		if !inView {
			t.Fatalf("after scrolling to %d rooms, the Open a room button is off screen", count)
		}
		if count == 500 {
			break
		}
		if n > 200 {
			t.Fatalf("scrolling 200 times showed %d rooms, want 500", count)
		}
		p.waitFor(fmt.Sprintf("more than %d rooms after scrolling", count), fmt.Sprintf(`document.querySelectorAll('#rooms tbody tr').length > %d`, count), 10*time.Second)
	}
	var distinct int
	p.eval(`new Set(Array.from(document.querySelectorAll('#rooms tbody tr'), tr => tr.dataset.code)).size`, &distinct)
	if distinct != 500 {
		t.Fatalf("the lobby shows %d distinct rooms, want 500", distinct)
	}
	p.waitFor("the end of the list said", `document.getElementById('rooms-status').textContent === '500 rooms open. The list updates by itself.'`, 5*time.Second)
	p.screenshot("lobby-500")

	// Search as people type: case and accents left out.
	search := func(q string, want ...string) {
		t.Helper()
		p.eval(`document.getElementById('room-search').value = ''; true`, new(bool))
		p.run(chromedp.SendKeys(chromedp.ID("room-search"), q))
		names := `Array.from(document.querySelectorAll('#rooms tbody tr .room-link'), a => a.textContent).sort().join('|')`
		wantJS := jsString(joinSorted(want))
		p.waitFor(fmt.Sprintf("search %q shows %v", q, want), names+` === `+wantJS, 10*time.Second)
	}
	search("SALSA tuesday 45", "Salsa Tuesday 457")
	search("cafe", "Café Ñandú")
	search("ñandu", "Café Ñandú")
	search("ñandú", "Café Ñandú")
	search("salsa", salsaRooms()...)
	search("nothing like this")
	p.waitFor("no match said", `document.getElementById('rooms-status').textContent.startsWith('No open rooms named like')`, 5*time.Second)

	// The bar's button takes you to the form, which opens a room and leads it.
	p.run(chromedp.Click(chromedp.ID("open-room")))
	p.waitFor("the name field focused", `document.activeElement === document.getElementById('room-name')`, 5*time.Second)
	p.run(
		chromedp.SendKeys(chromedp.ID("room-name"), "Bachata Friday"),
		chromedp.SendKeys(chromedp.ID("video-title"), "Routine"),
		chromedp.SendKeys(chromedp.ID("video-length"), "3:45"),
		chromedp.Click(chromedp.CSS(`#create button[type=submit]`)),
	)
	p.waitFor("the new room opened", `location.pathname.endsWith('/room.html') && new URLSearchParams(location.search).get('code')`, 10*time.Second)
}

func salsaRooms() []string {
	var out []string
	for i := 7; i < 500; i += 50 {
		out = append(out, fmt.Sprintf("Salsa Tuesday %d", i))
	}
	return out
}

func joinSorted(names []string) string {
	s := append([]string(nil), names...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	out := ""
	for i, n := range s {
		if i > 0 {
			out += "|"
		}
		out += n
	}
	return out
}
