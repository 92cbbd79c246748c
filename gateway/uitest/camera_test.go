package uitest

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// The dancer's camera (issue 45 items 3 and 6): Chromium's fake camera, fed a clip whose
// frames carry their number and a mark on their left, shows beside the video, mirrored; a
// refused permission, a page that is not a secure context, and a phone-sized screen.

// Camera clip layout (320×240): the top band's left half is white and its right half black
// (so mirroring shows in the pixels), and the bottom band holds the frame's number in eight
// blocks of 40 px, the most significant bit on the left, white for 1.
const (
	clipW, clipH, clipFrames = 320, 240, 60
)

// cameraClip writes a Y4M clip of clipFrames frames at 15 fps for
// --use-file-for-fake-video-capture (Chromium loops it).
func cameraClip(t *testing.T) string {
	t.Helper()
	return numberedClip(t, "camera", clipFrames)
}

// numberedClip writes <name>.y4m: frames frames at 15 fps (at most 256), each carrying its
// number and the mark on its left as the camera clip's layout says.
func numberedClip(t *testing.T, name string, frames int) string {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "YUV4MPEG2 W%d H%d F15:1 Ip A1:1 C420jpeg\n", clipW, clipH)
	y := make([]byte, clipW*clipH)
	chroma := bytes.Repeat([]byte{128}, clipW*clipH/2)
	for n := range frames {
		for row := range clipH {
			for col := range clipW {
				v := byte(128)
				switch {
				case row < 60 && col < clipW/2:
					v = 255
				case row < 60:
					v = 0
				case row >= 180:
					if n>>(7-col/40)&1 == 1 {
						v = 255
					} else {
						v = 0
					}
				}
				y[row*clipW+col] = v
			}
		}
		b.WriteString("FRAME\n")
		b.Write(y)
		b.Write(chroma)
	}
	path := filepath.Join(t.TempDir(), name+".y4m")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// newCameraBrowser is newBrowser with Chromium's fake camera playing clip. Permission is not
// granted by a fake prompt: each test grants or refuses it with the DevTools protocol, as a
// person would answer the browser's question. vigil.test resolves to this machine, to open
// the room from an origin that is not a secure context.
func newCameraBrowser(t *testing.T, clip string) context.Context {
	t.Helper()
	return newBrowser(t,
		chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.Flag("use-file-for-fake-video-capture", clip),
		chromedp.Flag("host-resolver-rules", "MAP vigil.test 127.0.0.1"),
	)
}

// setCamera answers the page's camera question for origin: granted or denied.
func (p *page) setCamera(origin string, setting browser.PermissionSetting) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "camera"}, Setting: setting, Origin: origin,
		BrowserContextID: chromedp.FromContext(p.ctx).BrowserContextID,
	}); err != nil {
		p.t.Fatalf("%s: set the camera permission to %s: %v", p.name, setting, err)
	}
}

// cameraFrameJS reads the camera's current frame from its pixels (drawn unmirrored, as the
// camera gives it): its number and the brightness of the top band's two halves.
const cameraFrameJS = `(() => { const v = document.getElementById('camera');
	if (v.readyState < 2 || !v.videoWidth) return {frame: -1, left: 0, right: 0};
	const c = document.createElement('canvas'); c.width = 320; c.height = 240;
	const g = c.getContext('2d', {willReadFrequently: true}); g.drawImage(v, 0, 0, 320, 240);
	const lum = (x, y) => { const d = g.getImageData(x, y, 1, 1).data; return (d[0] + d[1] + d[2]) / 3; };
	let n = 0; for (let i = 0; i < 8; i++) n = n * 2 + (lum(i * 40 + 20, 210) > 128 ? 1 : 0);
	return {frame: n, left: lum(40, 30), right: lum(280, 30)}; })()`

type cameraFrame struct {
	Frame int     `json:"frame"`
	Left  float64 `json:"left"`
	Right float64 `json:"right"`
}

// shownSides is the brightness of the camera's top band, left and right, as the screen shows
// it (a screenshot of the element: what the dancer sees, mirroring included).
func (p *page) shownSides() (left, right float64) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	shot, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.ID("camera")))
	if err != nil {
		p.t.Fatalf("%s: screenshot the camera: %v", p.name, err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		p.t.Fatalf("%s: decode the camera's screenshot: %v", p.name, err)
	}
	b := img.Bounds()
	lum := func(fx, fy float64) float64 {
		r, g, bl, _ := img.At(b.Min.X+int(fx*float64(b.Dx())), b.Min.Y+int(fy*float64(b.Dy()))).RGBA()
		return float64(r+g+bl) / 3 / 257
	}
	return lum(0.125, 0.125), lum(0.875, 0.125)
}

// TestRoomCamera: a viewer turns on the camera (granted): the fake camera's frames show beside
// the video, advancing, mirrored by default (the screen shows the clip's white half on the
// right), and "Mirror my camera" turns that off; on a phone-sized screen the camera lies over
// the video, half-transparent. A second viewer refuses the camera and a third opens the room
// from an origin that is not a secure context: each is told why in a sentence, and follows
// the leader all the same.
func TestRoomCamera(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	b := newCameraBrowser(t, cameraClip(t))
	file := makeVideo(t, "camera", 30)
	code, token := openRoom(t, s, "Camera", "camera", 30_000)
	leader := newPage(t, b, "leader")
	leader.openAsLeader(s, code, token)
	leader.run(chromedp.SetUploadFiles(chromedp.ID("file"), []string{file}))
	leader.waitFor("leader controls enabled", `!document.getElementById('play').disabled`, 15*time.Second)
	leader.run(chromedp.Click(chromedp.ID("play")))

	v := newPage(t, b, "viewer")
	v.setCamera(s.url, browser.PermissionSettingGranted)
	v.open(s.url + "/ui/room.html?code=" + code)
	v.waitFor("connected as a viewer", `document.getElementById('conn').textContent.includes('following')`, 15*time.Second)
	v.run(chromedp.SetUploadFiles(chromedp.ID("file"), []string{file}))
	var asked bool
	v.eval(`window.vigilRoom.state.get('camera') !== 'off'`, &asked)
	if asked {
		t.Fatal("the page asked for the camera before its button was pressed")
	}
	v.clickSettled("camera-toggle")
	v.waitFor("camera on", `window.vigilRoom.state.get('camera') === 'on' && document.getElementById('camera').videoWidth === 320
		&& document.getElementById('camera-note').textContent.includes('nothing is recorded or sent')`, 15*time.Second)
	var first, later cameraFrame
	v.eval(cameraFrameJS, &first)
	v.waitFor("the camera's frames advance", cameraFrameJS+`.frame !== `+fmt.Sprint(first.Frame), 10*time.Second)
	v.eval(cameraFrameJS, &later)
	if first.Frame < 0 || first.Frame >= clipFrames || later.Frame < 0 || later.Frame >= clipFrames {
		t.Errorf("camera frames numbered %d then %d, want numbers of the clip's 0..%d", first.Frame, later.Frame, clipFrames-1)
	}
	if later.Left < 200 || later.Right > 55 {
		t.Errorf("camera frame as drawn: top band left %.0f, right %.0f; want the clip's white left and black right", later.Left, later.Right)
	}
	var beside bool
	v.eval(`(() => { const p = document.getElementById('player').getBoundingClientRect(), c = document.getElementById('camera').getBoundingClientRect();
		return c.width > 200 && c.left >= p.right - 1 && Math.abs(c.top - p.top) < 2; })()`, &beside)
	if !beside {
		t.Error("on a 1280 px wide screen the camera is not beside the video")
	}
	if l, r := v.shownSides(); l > 55 || r < 200 {
		t.Errorf("camera as shown: top band left %.0f, right %.0f; want it mirrored by default (black left, white right)", l, r)
	}
	v.screenshot("room-camera")
	v.clickSettled("camera-mirror")
	v.waitFor("camera unmirrored", `document.getElementById('camera-mirror').getAttribute('aria-pressed') === 'false' && !document.getElementById('camera').classList.contains('mirrored')`, 5*time.Second)
	if l, r := v.shownSides(); l < 200 || r > 55 {
		t.Errorf("camera unmirrored as shown: top band left %.0f, right %.0f; want white left, black right", l, r)
	}
	v.clickSettled("camera-mirror")
	// On a phone the camera lies over the video, half-transparent, and the page does not scroll sideways.
	v.run(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	v.waitFor("camera over the video on a phone", `(() => { const p = document.getElementById('player').getBoundingClientRect(), c = document.getElementById('camera').getBoundingClientRect();
		return window.innerWidth === 390 && Math.abs(c.left - p.left) < 2 && Math.abs(c.width - p.width) < 2 && c.top < p.bottom && c.bottom > p.top
			&& getComputedStyle(document.getElementById('camera')).opacity === '0.5' && document.documentElement.scrollWidth <= 390; })()`, 5*time.Second)
	v.screenshot("room-camera-phone")
	v.run(chromedp.EmulateViewport(1280, 900))
	v.waitFor("still following the leader", `!document.getElementById('player').paused && Math.abs(window.vigilRoom.drift) < 250`, 15*time.Second)
	v.clickSettled("camera-toggle")
	v.waitFor("camera off", `window.vigilRoom.state.get('camera') === 'off' && document.getElementById('camera').hidden && document.getElementById('camera').srcObject === null`, 5*time.Second)

	refused := newPage(t, b, "viewer who refuses")
	refused.setCamera(s.url, browser.PermissionSettingDenied)
	refused.open(s.url + "/ui/room.html?code=" + code)
	refused.waitFor("connected as a viewer", `document.getElementById('conn').textContent.includes('following')`, 15*time.Second)
	refused.clickSettled("camera-toggle")
	refused.waitFor("refusal explained", `window.vigilRoom.state.get('camera') === 'failed' && document.getElementById('camera').hidden
		&& document.getElementById('camera-note').textContent.startsWith('The camera was not allowed')`, 15*time.Second)
	refused.screenshot("room-camera-refused")

	insecure := newPage(t, b, "viewer on plain HTTP")
	insecureURL := strings.Replace(s.url, "127.0.0.1", "vigil.test", 1)
	insecure.open(insecureURL + "/ui/room.html?code=" + code)
	insecure.waitFor("connected as a viewer", `document.getElementById('conn').textContent.includes('following')`, 15*time.Second)
	var secure bool
	insecure.eval(`window.isSecureContext`, &secure)
	if secure {
		t.Fatalf("%s is a secure context; the test needs one that is not", insecureURL)
	}
	insecure.clickSettled("camera-toggle")
	insecure.waitFor("secure context explained", `window.vigilRoom.state.get('camera') === 'failed'
		&& document.getElementById('camera-note').textContent.startsWith('Browsers give a camera only to secure pages (HTTPS, or localhost')`, 5*time.Second)
	insecure.run(chromedp.SetUploadFiles(chromedp.ID("file"), []string{file}))
	insecure.waitFor("following without a camera", `!document.getElementById('player').paused && Math.abs(window.vigilRoom.drift) < 250`, 15*time.Second)
}
