// The dancer's own camera, beside the leader's video (over it, half-transparent, on a narrow
// screen), mirrored by default as a mirror in a studio is. The browser asks for the camera
// only when the button is pressed; the picture stays on this device (nothing is sent, and
// nothing is recorded unless the dancer records a take: takes.js). When there is no camera, when it is refused, or when the page is not in a secure
// context (browsers give a camera only to HTTPS pages and localhost), a sentence says so and
// the rest of the room keeps working.
//
// It owns #camera (its video), #camera-toggle, #camera-mirror and #camera-note. State:
// camera ('off', 'asking', 'on' or 'failed'), cameraMirrored.
import { $ } from '../common.js';
import * as state from './state.js';

const MIRROR_KEY = 'vigil.cameraMirror';
const view = $('camera');
let stream = null;

/** cameraStream is the live camera (null when off), for a module that records it. */
export const cameraStream = () => stream;

/** failure is the sentence for a getUserMedia error. */
function failure(err) {
  switch (err?.name) {
    case 'NotAllowedError':
    case 'SecurityError':
      return 'The camera was not allowed, so it stays off. To use it, allow the camera for this site in your browser (the camera icon by the address, or the site settings) and press “Turn on my camera” again. Everything else in the room works without it.';
    case 'NotFoundError':
    case 'OverconstrainedError':
      return 'This device has no camera the browser can use, so there is nothing to show beside the video. Everything else in the room works without it.';
    case 'NotReadableError':
    case 'AbortError':
      return 'The camera is busy (another app or tab may be using it). Close that and press “Turn on my camera” again.';
    default:
      return `The camera could not start (${err?.message || 'no reason given'}). Everything else in the room works without it.`;
  }
}

/** turnOn asks for the camera and shows it. */
async function turnOn() {
  if (!window.isSecureContext || !navigator.mediaDevices?.getUserMedia) {
    state.set({ camera: 'failed', cameraError: `Browsers give a camera only to secure pages (HTTPS, or localhost on this computer), and this page is plain HTTP at ${location.host}. Open the room over HTTPS to use your camera (docs/UI.md says how from a phone); everything else in the room works as it is.` });
    return;
  }
  state.set({ camera: 'asking', cameraError: '' });
  try {
    const s = await navigator.mediaDevices.getUserMedia({ video: { facingMode: 'user', width: { ideal: 640 }, height: { ideal: 480 } }, audio: false });
    if (state.get('camera') !== 'asking') { for (const t of s.getTracks()) t.stop(); return; } // turned off meanwhile
    stream = s;
    for (const t of s.getVideoTracks()) t.addEventListener('ended', () => turnOff('The camera stopped (it was unplugged, or another app took it).'));
    view.srcObject = s;
    await view.play().catch(() => { /* muted inline video: plays once the frames come */ });
    state.set({ camera: 'on' });
  } catch (err) {
    state.set({ camera: 'failed', cameraError: failure(err) });
  }
}

/** turnOff stops the camera (the light goes off), saying why when it was not the dancer's choice. */
function turnOff(why = '') {
  if (stream) for (const t of stream.getTracks()) t.stop();
  stream = null;
  view.srcObject = null;
  state.set({ camera: why ? 'failed' : 'off', cameraError: why });
}

/** toggleCamera turns the camera on, or off. */
export function toggleCamera() {
  const now = state.get('camera');
  if (now === 'on' || now === 'asking') turnOff();
  else turnOn();
}

function render() {
  const now = state.get('camera');
  const on = now === 'on';
  view.hidden = !on;
  document.body.classList.toggle('camera-on', on);
  view.classList.toggle('mirrored', !!state.get('cameraMirrored'));
  $('camera-toggle').textContent = on || now === 'asking' ? 'Turn off my camera' : 'Turn on my camera';
  $('camera-toggle').setAttribute('aria-pressed', String(on));
  $('camera-mirror').hidden = !on;
  $('camera-mirror').setAttribute('aria-pressed', String(!!state.get('cameraMirrored')));
  const note = $('camera-note');
  note.className = now === 'failed' ? 'notice camera-note' : 'muted small camera-note';
  if (now === 'failed') note.textContent = state.get('cameraError');
  else if (now === 'asking') note.textContent = 'Asking the browser for your camera…';
  else if (on && state.get('takeStatus') === 'recording') note.textContent = `Your camera, ${state.get('cameraMirrored') ? 'mirrored as in a studio mirror' : 'not mirrored (as others see you)'}, recording your take. It stays on this device: nothing is sent.`;
  else if (on) note.textContent = `Your camera, ${state.get('cameraMirrored') ? 'mirrored as in a studio mirror' : 'not mirrored (as others see you)'}. It stays on this device: nothing is recorded or sent.`;
  else note.textContent = '';
}

let mirrored = true;
try { mirrored = localStorage.getItem(MIRROR_KEY) !== '0'; } catch { /* storage off: mirrored, not remembered */ }
state.set({ camera: 'off', cameraError: '', cameraMirrored: mirrored });
state.subscribe(['camera', 'cameraError', 'cameraMirrored', 'takeStatus'], render); // takes.js records it
$('camera-toggle').addEventListener('click', toggleCamera);
$('camera-mirror').addEventListener('click', () => {
  const on = !state.get('cameraMirrored');
  try { localStorage.setItem(MIRROR_KEY, on ? '1' : '0'); } catch { /* not remembered */ }
  state.set({ cameraMirrored: on });
});
state.subscribe(['ended'], () => turnOff());
render();
