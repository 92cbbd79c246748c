package uitest

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestRoomKeyboard: the shortcuts (issue 45 item 5). ? lists them and Esc closes the list;
// the leader's Space plays and pauses, → and ← move five seconds, 2 picks 0.75×, [ and ] loop
// between two playheads, and each reaches the viewer; the viewer's m mirrors and c turns the
// camera on; nothing happens while typing in a field.
func TestRoomKeyboard(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	b := newCameraBrowser(t, cameraClip(t))
	file := makeVideo(t, "keys", 30)
	code, token := openRoom(t, s, "Keys", "keys", 30_000)
	leader := newPage(t, b, "leader")
	leader.openAsLeader(s, code, token)
	leader.run(chromedp.SetUploadFiles(chromedp.ID("file"), []string{file}))
	leader.waitFor("leader controls enabled", `!document.getElementById('play').disabled`, 15*time.Second)
	v := newPage(t, b, "viewer")
	v.setCamera(s.url, browser.PermissionSettingGranted)
	v.open(s.url + "/ui/room.html?code=" + code)
	v.waitFor("connected as a viewer", `document.getElementById('conn').textContent.includes('following')`, 15*time.Second)
	v.run(chromedp.SetUploadFiles(chromedp.ID("file"), []string{file}))
	v.waitFor("file loaded", `document.getElementById('player').readyState >= 1`, 15*time.Second)
	for _, p := range []*page{leader, v} {
		p.eval(`document.activeElement && document.activeElement.blur(); true`, new(bool))
	}

	leader.run(chromedp.KeyEvent("?"))
	leader.waitFor("shortcuts listed", `!document.getElementById('keys-help').hidden && document.getElementById('keys-list').textContent.includes('Play or pause')
		&& document.getElementById('keys-open').getAttribute('aria-expanded') === 'true'`, 5*time.Second)
	leader.screenshotViewport("room-keys")
	leader.run(chromedp.KeyEvent(kb.Escape))
	leader.waitFor("shortcuts closed", `document.getElementById('keys-help').hidden`, 5*time.Second)
	leader.eval(`document.activeElement && document.activeElement.blur(); true`, new(bool))

	leader.run(chromedp.KeyEvent(" "))
	leader.waitFor("space plays", `!document.getElementById('player').paused`, 5*time.Second)
	v.waitFor("the viewer plays", `!document.getElementById('player').paused`, 15*time.Second)
	leader.run(chromedp.KeyEvent(" "))
	leader.waitFor("space pauses", `document.getElementById('player').paused`, 5*time.Second)
	v.waitFor("the viewer pauses", `document.getElementById('player').paused`, 15*time.Second)

	var at float64
	leader.eval(`document.getElementById('player').currentTime * 1000`, &at)
	leader.run(chromedp.KeyEvent(kb.ArrowRight))
	leader.waitFor("→ moves 5 s on", fmt.Sprintf(`(() => { const v = document.getElementById('player'); return !v.seeking && Math.abs(v.currentTime * 1000 - %f) < 1; })()`, at+5000), 5*time.Second)
	leader.run(chromedp.KeyEvent(kb.ArrowLeft))
	leader.waitFor("← moves 5 s back", fmt.Sprintf(`(() => { const v = document.getElementById('player'); return !v.seeking && Math.abs(v.currentTime * 1000 - %f) < 1; })()`, at), 5*time.Second)

	leader.run(chromedp.KeyEvent("2"))
	v.waitFor("2 picks 0.75×", `document.getElementById('practice-status').dataset.rate === '0.75'`, 15*time.Second)

	for _, ms := range []int{2000, 4000} {
		leader.eval(fmt.Sprintf(`document.getElementById('player').currentTime = %f; true`, float64(ms)/1000), new(bool))
		leader.waitFor("seeked", fmt.Sprintf(`(() => { const v = document.getElementById('player'); return !v.seeking && Math.abs(v.currentTime * 1000 - %d) < 1; })()`, ms), 5*time.Second)
		if ms == 2000 {
			leader.run(chromedp.KeyEvent("["))
			leader.waitFor("[ noted", `document.getElementById('keys-note').textContent.startsWith('The loop starts here')`, 5*time.Second)
		} else {
			leader.run(chromedp.KeyEvent("]"))
		}
	}
	v.waitFor("[ and ] loop 0:02-0:04", `document.getElementById('practice-status').dataset.loop === '2000-4000'`, 15*time.Second)

	// Typing in a field types; the page does nothing with the keys.
	leader.run(chromedp.Click(chromedp.ID("mark-label")), chromedp.KeyEvent("m1 [c]?"))
	var typed struct {
		Value    string `json:"value"`
		Mirrored bool   `json:"mirrored"`
		Loop     string `json:"loop"`
		Rate     string `json:"rate"`
		Help     bool   `json:"help"`
		Camera   string `json:"camera"`
	}
	leader.eval(`({value: document.getElementById('mark-label').value, mirrored: window.vigilRoom.mirrored, loop: document.getElementById('practice-status').dataset.loop,
		rate: document.getElementById('practice-status').dataset.rate, help: !document.getElementById('keys-help').hidden, camera: window.vigilRoom.state.get('camera')})`, &typed)
	if typed.Value != "m1 [c]?" || typed.Mirrored || typed.Loop != "2000-4000" || typed.Rate != "0.75" || typed.Help || typed.Camera != "off" {
		t.Errorf("typing %q in the mark's label: %+v; want the text typed and nothing else changed", "m1 [c]?", typed)
	}

	v.run(chromedp.KeyEvent("m"))
	v.waitFor("m mirrors", `window.vigilRoom.mirrored && document.getElementById('player').classList.contains('mirrored')`, 5*time.Second)
	v.run(chromedp.KeyEvent("c"))
	v.waitFor("c turns the camera on", `window.vigilRoom.state.get('camera') === 'on' && document.getElementById('camera').videoWidth === 320`, 15*time.Second)
	v.run(chromedp.KeyEvent("c"))
	v.waitFor("c turns it off", `window.vigilRoom.state.get('camera') === 'off'`, 5*time.Second)
	// The leader's keys are not a viewer's: its Space leaves the room's playback alone.
	var before, after string
	v.eval(`JSON.stringify(window.vigilRoom.room.playback)`, &before)
	v.run(chromedp.KeyEvent(" "), chromedp.KeyEvent("1"))
	v.eval(`JSON.stringify(window.vigilRoom.room.playback)`, &after)
	if before != after {
		t.Errorf("a viewer's Space and 1 changed the room's playback: %s, then %s", before, after)
	}
}
