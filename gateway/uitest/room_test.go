package uitest

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/coder/websocket"
)

// playerSample is a page's player position, the machine's clock when it was read, and what the
// page believed then (for a failure's message).
type playerSample struct {
	PosMs   float64 `json:"pos"`
	AtMs    float64 `json:"at"`
	Paused  bool    `json:"paused"`
	Seeking bool    `json:"seeking"`
	// Offset is the page's estimate of the room's clock minus its own, Drift its player minus
	// the room's timeline, OriginSkew Date.now() minus performance.timeOrigin + performance.now().
	Offset     float64 `json:"offset"`
	Drift      float64 `json:"drift"`
	OriginSkew float64 `json:"originSkew"`
}

// sampleJS reads a page's player. Its time is Date.now(), the machine's clock that every tab
// shares: performance.timeOrigin is fixed once per renderer process, so two tabs' timeOrigin +
// performance.now() differ by however far the wall clock moved against the monotonic one
// between their processes' starts.
const sampleJS = `(() => { const v = document.getElementById('player'); const r = window.vigilRoom || {};
	const now = Date.now();
	return {pos: v.currentTime * 1000, at: now, paused: v.paused, seeking: v.seeking,
		offset: r.offset || 0, drift: r.drift || 0, originSkew: now - (performance.timeOrigin + performance.now())}; })()`

func (p *page) sample() playerSample {
	p.t.Helper()
	var s playerSample
	p.eval(sampleJS, &s)
	return s
}

// gap is how far the viewer's player is from the leader's, both taken to the same instant (the
// tabs share one browser clock; a playing leader advances 1 ms per ms).
func gap(leader, viewer playerSample) float64 {
	lead := leader.PosMs
	if !leader.Paused {
		lead += viewer.AtMs - leader.AtMs
	}
	return viewer.PosMs - lead
}

// lobbyCellJS reads a cell of the lobby row of a room: its text, or null while the row is missing.
func lobbyCellJS(code, class string) string {
	return fmt.Sprintf(`(document.querySelector('tr[data-code=%s] td.%s') || {textContent: null}).textContent`, jsString(code), class)
}

// TestPracticeRoom: a leader opens a room from the lobby and plays a video; a viewer on another
// browser profile follows within 250 ms through play, seek and pause; the lobby shows the
// viewer count change; marks and chat reach both; ending the room tells the viewer plainly.
func TestPracticeRoom(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	browser := newBrowser(t)
	videoFile := testVideo(t)

	lobby := newPage(t, browser, "lobby")
	lobby.open(s.url + "/ui/")
	lobby.waitFor("lobby loaded", `document.getElementById('rooms-status').textContent.includes('open')`, 10*time.Second)

	// The leader opens a room from the lobby's form; picking the file fills title and length.
	leader := newPage(t, browser, "leader")
	leader.open(s.url + "/ui/")
	// A form sent incomplete says what to fix.
	leader.run(chromedp.Click(chromedp.CSS(`#create button[type=submit]`)))
	leader.waitFor("readable form error", `document.getElementById('create-error').textContent === 'Give the room a name.' && document.activeElement.id === 'room-name'`, 5*time.Second)
	leader.run(
		chromedp.SendKeys(chromedp.ID("room-name"), "Tuesday practice"),
		chromedp.SetUploadFiles(chromedp.ID("video-file"), []string{videoFile}),
	)
	leader.waitFor("length filled from the file", `document.getElementById('video-length').value === '0:30'`, 10*time.Second)
	var title string
	leader.eval(`document.getElementById('video-title').value`, &title)
	if title != "practice" {
		t.Errorf("title filled from the file = %q, want %q", title, "practice")
	}
	leader.run(chromedp.Click(chromedp.CSS(`#create button[type=submit]`)))
	leader.waitFor("in the room", `location.pathname.endsWith('/room.html') && document.getElementById('room-name').textContent === 'Tuesday practice'`, 10*time.Second)
	var loc string
	leader.eval(`location.href`, &loc)
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	code := u.Query().Get("code")
	leader.run(
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{videoFile}),
		chromedp.SendKeys(chromedp.ID("chat-name-input"), "Lea"+kb.Enter),
	)
	leader.waitFor("leader controls enabled", `!document.getElementById('play').disabled && document.getElementById('conn').textContent.includes('leading')`, 10*time.Second)

	lobby.waitFor("room listed with its leader", lobbyCellJS(code, "leader")+` === 'present' && `+lobbyCellJS(code, "viewers")+` === '0'`, 10*time.Second)

	// A viewer, in another browser profile, picks the room from the lobby.
	viewer := newPage(t, browser, "viewer")
	viewer.open(s.url + "/ui/")
	viewer.waitFor("room listed", `!!document.querySelector('tr[data-code=`+jsString(code)+`] a.room-link')`, 10*time.Second)
	viewer.run(chromedp.Click(chromedp.CSS(`tr[data-code="` + code + `"] a.room-link`)))
	viewer.waitFor("connected as a viewer", `document.getElementById('conn').textContent.includes('following')`, 10*time.Second)
	viewer.run(
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{videoFile}),
		chromedp.SendKeys(chromedp.ID("chat-name-input"), "Vic"+kb.Enter),
	)
	lobby.waitFor("lobby shows 1 viewer", lobbyCellJS(code, "viewers")+` === '1'`, 10*time.Second)
	leader.waitFor("leader sees 1 viewer", `document.getElementById('occupancy').textContent.startsWith('1 viewer ')`, 10*time.Second)
	lobby.screenshot("lobby")
	lobby.checkPlain("lobby-phone")

	// A second viewer comes and goes: the lobby counts 2, then 1 again.
	second := newPage(t, browser, "second viewer")
	second.open(s.url + "/ui/room.html?code=" + code)
	lobby.waitFor("lobby shows 2 viewers", lobbyCellJS(code, "viewers")+` === '2'`, 10*time.Second)
	second.close()
	lobby.waitFor("lobby back to 1 viewer", lobbyCellJS(code, "viewers")+` === '1'`, 15*time.Second)

	// Play: the viewer's player starts and stays within 250 ms of the leader's.
	leader.run(chromedp.Click(chromedp.ID("play")))
	viewer.waitFor("viewer playing", `(() => { const v = document.getElementById('player'); return !v.paused && v.currentTime > 0.3; })()`, 10*time.Second)
	viewer.waitFor("viewer settled", `Math.abs(window.vigilRoom.drift) < 50`, 10*time.Second)
	worst := followFor(t, leader, viewer, 4*time.Second)
	t.Logf("while playing, the viewer was at most %.0f ms from the leader", worst)

	// Seek forward 5 s: the viewer follows.
	leader.run(chromedp.Click(chromedp.ID("fwd")))
	viewer.waitFor("viewer followed the seek", `document.getElementById('player').currentTime > 9`, 10*time.Second)
	viewer.waitFor("viewer settled after the seek", `Math.abs(window.vigilRoom.drift) < 50`, 10*time.Second)
	worst = followFor(t, leader, viewer, 2*time.Second)
	t.Logf("after a seek, the viewer was at most %.0f ms from the leader", worst)

	// A mark reaches the viewer; chat goes both ways.
	leader.run(chromedp.SendKeys(chromedp.ID("mark-label"), "chorus"+kb.Enter))
	viewer.waitFor("mark shown", `Array.from(document.querySelectorAll('#marks li')).some(li => li.textContent.endsWith(' chorus'))`, 10*time.Second)
	leader.run(chromedp.SendKeys(chromedp.ID("chat-input-room-"+code), "from the top"+kb.Enter))
	viewer.waitForMessage("from the top")
	viewer.run(chromedp.SendKeys(chromedp.ID("chat-input-room-"+code), "ready"+kb.Enter))
	leader.waitForMessage("ready")
	leader.waitForMessage("from the top")
	leader.waitFor("leader shows its mark", `Array.from(document.querySelectorAll('#marks li')).some(li => li.textContent.endsWith(' chorus'))`, 5*time.Second)
	// A formation set while the video plays reaches the viewer too (TestFormation has the rest).
	for _, name := range []string{"Lea", "Vic", "Sam"} {
		leader.run(chromedp.SendKeys(chromedp.ID("dancer-name"), name+kb.Enter))
	}
	viewer.waitFor("formation shown", showsDancers(dancer{"Lea", 1, 1}, dancer{"Vic", 2, 1}, dancer{"Sam", 3, 1}), 10*time.Second)
	leader.screenshot("room-leader")
	viewer.screenshot("room-viewer")

	// Pause, with the keyboard: the viewer stops where the leader stopped.
	leader.run(chromedp.Focus(chromedp.ID("pause")), chromedp.KeyEvent(kb.Enter))
	viewer.waitFor("viewer paused", `document.getElementById('player').paused && !document.getElementById('player').seeking`, 10*time.Second)
	viewer.waitFor("viewer at the leader's position", `Math.abs(window.vigilRoom.drift) <= 25`, 10*time.Second)
	l, v := leader.sample(), viewer.sample()
	if g := gap(l, v); math.Abs(g) > 250 {
		t.Errorf("paused: viewer at %.0f ms, leader at %.0f ms: %.0f ms apart, want within 250", v.PosMs, l.PosMs, g)
	}

	// Reload: the viewer's player reloads its file and comes back to the leader's position.
	viewer.eval(`window.reloads = 0; document.getElementById('player').addEventListener('emptied', () => window.reloads++); true`, new(bool))
	leader.run(chromedp.Click(chromedp.ID("reload")))
	viewer.waitFor("viewer reloaded", `window.reloads > 0 && document.getElementById('player').readyState >= 1`, 10*time.Second)
	viewer.waitFor("viewer back at the leader's position", `Math.abs(window.vigilRoom.drift) <= 25 && !document.getElementById('player').seeking`, 10*time.Second)

	leader.checkPlain("")
	viewer.checkPlain("room-phone")

	// The leader ends the room: the viewer is told so plainly, the lobby drops it.
	leader.eval(`window.confirm = () => true`, new(any))
	leader.run(chromedp.Click(chromedp.ID("end")))
	viewer.waitFor("ended notice", `!document.getElementById('ended').hidden && document.getElementById('ended-text').textContent.startsWith('The leader ended this room') && document.getElementById('occupancy').textContent === 'Room closed.'`, 10*time.Second)
	lobby.waitFor("room gone from the lobby", `!document.querySelector('tr[data-code=`+jsString(code)+`]')`, 10*time.Second)
	var controlsHidden bool
	viewer.eval(`document.getElementById('player-controls').hidden && document.getElementById('file').disabled`, &controlsHidden)
	if !controlsHidden {
		t.Error("the viewer's controls stay usable after the room ended")
	}
	viewer.screenshot("room-ended")
}

// followFor samples both players for d and fails when the viewer is more than 250 ms from the
// leader; it returns the largest gap seen.
func followFor(t *testing.T, leader, viewer *page, d time.Duration) float64 {
	t.Helper()
	worst := 0.0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var bad []string
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		l, v := leader.sample(), viewer.sample()
		if l.Paused || v.Paused {
			t.Fatalf("a player stopped while following: leader paused=%v, viewer paused=%v", l.Paused, v.Paused)
		}
		g := gap(l, v)
		worst = math.Max(worst, math.Abs(g))
		if math.Abs(g) > 250 {
			bad = append(bad, fmt.Sprintf("viewer %.0f ms vs leader %.0f ms (%+.0f; viewer drift %+.0f, offsets %+.0f/%+.0f, origin skews %+.0f/%+.0f)",
				v.PosMs, l.PosMs, g, v.Drift, l.Offset, v.Offset, l.OriginSkew, v.OriginSkew))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("viewer more than 250 ms from the leader: %s", strings.Join(bad, "; "))
	}
	return worst
}

// leadFromSocket leads a room from a plain WebSocket, as a script would, sending a sync every
// 500 ms so the room stays active; the returned function stops it and leaves.
func leadFromSocket(t *testing.T, s *stack, code, token string) (leave func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	u := "ws" + strings.TrimPrefix(s.gateway.URL, "http") + "/rooms/" + code + "/websocket?role=leader&clientId=keeper&token=" + url.QueryEscape(token)
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		cancel()
		t.Fatalf("lead room %s from a socket: %v", code, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"sync","playing":false,"positionMs":0}`)); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	go func() { // the server's frames are read and dropped
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}()
	var once sync.Once
	leave = func() {
		once.Do(func() {
			cancel()
			<-done
			_ = c.Close(websocket.StatusNormalClosure, "leaving")
		})
	}
	t.Cleanup(leave)
	return leave
}

// TestExpiredRoom: a room whose leader stops acting expires, and its page says so plainly.
func TestExpiredRoom(t *testing.T) {
	t.Parallel()
	s := startStack(t, stackOptions{idleTTL: 3 * time.Second})
	browser := newBrowser(t)
	code, token := openRoom(t, s, "Short lived", "Warm-up", 60000)
	// A leader keeps the room active until the viewer is in, however long the page takes to
	// load on a busy machine; the room's idle clock starts when the leader stops.
	leave := leadFromSocket(t, s, code, token)

	viewer := newPage(t, browser, "viewer")
	viewer.open(s.url + "/ui/room.html?code=" + code)
	viewer.waitFor("connected", `document.getElementById('conn').textContent.includes('following')`, 10*time.Second)
	viewer.waitFor("occupancy shown", `document.getElementById('occupancy').textContent === '1 viewer · leader present'`, 10*time.Second)
	leave()
	viewer.waitFor("leader gone", `document.getElementById('occupancy').textContent === '1 viewer · leader away'`, 10*time.Second)
	viewer.waitFor("expired notice", `!document.getElementById('ended').hidden && document.getElementById('ended-text').textContent.startsWith('This room has expired')`, 15*time.Second)

	// Coming back to the link later says the room is gone, not an error.
	viewer.open(s.url + "/ui/room.html?code=" + code)
	viewer.waitFor("gone notice", `!document.getElementById('ended').hidden && document.getElementById('ended-text').textContent.startsWith('This room does not exist or has closed')`, 10*time.Second)
}

// TestRoomLinks: a broken link, a room that is gone and a leader key the room refuses each get
// a sentence saying what happened, not a silent or broken page.
func TestRoomLinks(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	browser := newBrowser(t)
	p := newPage(t, browser, "visitor")

	p.open(s.url + "/ui/room.html?code=" + url.QueryEscape("<b>Nope</b>"))
	p.waitFor("bad code explained", `document.getElementById('ended-text').textContent.startsWith('This link has no valid room code')`, 5*time.Second)

	p.open(s.url + "/ui/room.html?code=zzzzzz")
	p.waitFor("missing room explained", `document.getElementById('ended-text').textContent.startsWith('This room does not exist or has closed')`, 10*time.Second)

	var created struct {
		Code string `json:"code"`
	}
	postJSON(t, "POST", s.gateway.URL+"/lobby/rooms", map[string]any{"name": "Keyed", "video": map[string]any{"title": "Warm-up", "durationMs": 60000}}, &created, 201)
	p.eval(`localStorage.setItem('vigil.leader.`+created.Code+`', 'not-the-token'); true`, new(bool))
	p.open(s.url + "/ui/room.html?code=" + created.Code)
	p.waitFor("refused key explained", `document.getElementById('room-error').textContent.startsWith('The room did not accept your leader key')`, 15*time.Second)
	p.waitFor("viewer link offered", `!!document.querySelector('#conn a[href$="&as=viewer"]') && document.getElementById('leader-controls').hidden`, 5*time.Second)
	p.run(chromedp.Click(chromedp.CSS(`#conn a`)))
	p.waitFor("joined as a viewer", `document.getElementById('conn').textContent.includes('following')`, 10*time.Second)
}

// TestSwitchVideo: the leader switches everyone to another video file. Its title and length
// reach every viewer, who is asked to pick their own copy of it and then follows on it; the
// old video's marks go; a viewer who comes later gets the new video and is warned when the
// file they pick is not it.
func TestSwitchVideo(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	browser := newBrowser(t)
	first := testVideo(t)
	second := makeVideo(t, "second-routine", 12)
	code, token := openRoom(t, s, "Two routines", "practice", 30000)

	leader := newPage(t, browser, "leader")
	leader.openAsLeader(s, code, token)
	leader.run(chromedp.SetUploadFiles(chromedp.ID("file"), []string{first}))
	leader.waitFor("leader controls enabled", `!document.getElementById('play').disabled`, 10*time.Second)

	viewer := newPage(t, browser, "viewer")
	viewer.open(s.url + "/ui/room.html?code=" + code)
	viewer.waitFor("connected as a viewer", `document.getElementById('conn').textContent.includes('following')`, 10*time.Second)
	viewer.run(chromedp.SetUploadFiles(chromedp.ID("file"), []string{first}))
	leader.run(chromedp.Click(chromedp.ID("play")))
	viewer.waitFor("viewer playing the first video", `(() => { const v = document.getElementById('player'); return !v.paused && v.currentTime > 0.3; })()`, 10*time.Second)
	leader.run(chromedp.SendKeys(chromedp.ID("mark-label"), "intro"+kb.Enter))
	viewer.waitFor("mark shown", `document.querySelectorAll('#marks li').length === 1`, 10*time.Second)

	// Sent without a file: a sentence, nothing sent.
	leader.run(chromedp.Click(chromedp.CSS(`#switch summary`)), chromedp.Click(chromedp.ID("switch-send")))
	leader.waitFor("asks for the file", `document.getElementById('switch-error').textContent === 'Pick the video file first: its length is read from it.'`, 5*time.Second)

	// The leader picks the next file: its title and length are read from it; the title can be
	// edited before switching.
	leader.run(chromedp.SetUploadFiles(chromedp.ID("switch-file"), []string{second}))
	leader.waitFor("title and length read from the file", `document.getElementById('switch-title').value === 'second-routine' && document.getElementById('switch-length').textContent === 'Length: 0:12'`, 10*time.Second)
	leader.run(chromedp.SetValue(chromedp.ID("switch-title"), "Second routine"))
	leader.screenshot("room-switch")
	leader.run(chromedp.Click(chromedp.ID("switch-send")))

	// Every viewer is told, and asked for their copy; the old file stops.
	viewer.waitFor("viewer asked for the new file",
		`document.getElementById('switch-notice').textContent === 'The leader switched to another video: “Second routine” (0:12). Pick your copy of it above to keep following.'
		&& document.getElementById('room-info').textContent.startsWith('Video: Second routine (0:12)')
		&& document.getElementById('player').getAttribute('src') === null
		&& document.getElementById('follow').textContent === 'Pick your copy of “Second routine” to follow the leader.'
		&& document.querySelectorAll('#marks li').length === 0`, 10*time.Second)
	leader.waitFor("leader's player has the new file, paused at the start",
		`(() => { const v = document.getElementById('player'); return Math.abs(v.duration - 12) < 0.5 && v.paused && v.currentTime === 0 && !document.getElementById('play').disabled; })()
		&& document.getElementById('room-info').textContent.startsWith('Video: Second routine (0:12)') && document.getElementById('switch-notice').textContent === ''
		&& document.getElementById('file').files[0].name === 'second-routine.webm'`, 10*time.Second)
	viewer.screenshot("room-switched")
	viewer.checkPlain("")

	// The viewer picks their copy and follows the leader on it.
	viewer.run(chromedp.SetUploadFiles(chromedp.ID("file"), []string{second}))
	viewer.waitFor("new file loaded, nothing to warn about", `Math.abs(document.getElementById('player').duration - 12) < 0.5 && document.getElementById('switch-notice').textContent === '' && document.getElementById('file-warning').textContent === ''`, 10*time.Second)
	leader.run(chromedp.Click(chromedp.ID("play")))
	viewer.waitFor("viewer playing the new video", `(() => { const v = document.getElementById('player'); return !v.paused && v.currentTime > 0.3; })()`, 10*time.Second)
	viewer.waitFor("viewer settled", `Math.abs(window.vigilRoom.drift) < 50`, 10*time.Second)
	worst := followFor(t, leader, viewer, 2*time.Second)
	t.Logf("on the new video, the viewer was at most %.0f ms from the leader", worst)

	// Someone who comes later gets the new video, and is warned if they pick the old file.
	late := newPage(t, browser, "late viewer")
	late.open(s.url + "/ui/room.html?code=" + code)
	late.waitFor("late viewer sees the new video", `document.getElementById('room-info').textContent.startsWith('Video: Second routine (0:12)')`, 10*time.Second)
	late.run(chromedp.SetUploadFiles(chromedp.ID("file"), []string{first}))
	late.waitFor("wrong file warned about", `document.getElementById('file-warning').textContent === "Your file is 0:30 long but the room's video is 0:12: check that it is the same video."`, 10*time.Second)
}
