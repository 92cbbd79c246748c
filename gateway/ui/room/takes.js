// Takes, a practice tool: "Record my take" records the dancer's camera (MediaRecorder) from
// the next loop start or count-in to its end (the loop pass's end, or the end of the section
// the count-in leads into), stamped with the video's position at its start and the room's
// speed. "Compare" plays the take beside the video from that position, at that speed, on a
// second <video> of the same local file, so the room's player and follower are untouched:
// comparing never moves the room. One slider scrubs both. The last KEEP takes stay in the page
// (blob: URLs, each downloadable); nothing is uploaded.
//
// Chromium's recorded WebM has no duration and no index, so a take cannot be seeked as it
// comes; seekable() asks for a position past its end, which makes the browser read it through
// and learn its duration, after which seeking works.
//
// It owns #takes: #take-record, #take-note, #take-list and the compare box (#compare,
// #compare-ref, #compare-take, #compare-play, #compare-scrub, #compare-at, #compare-close).
// State: takeStatus ('idle', 'armed' or 'recording'), takes (newest first), takeNote.
import { $, clock, el } from '../common.js';
import { cameraStream } from './camera.js';
import { onTick } from './clock.js';
import { positionMs, video } from './player.js';
import * as state from './state.js';
import { fine, sortedMarks } from './timeline.js';

const KEEP = 3; // takes kept in the page; older ones are let go
const MAX_TAKE_MS = 5 * 60 * 1000; // a take stops here even if its section goes on
const WRAP_NEAR_MS = 500; // a jump from this close to the loop's end to this close to its start is a wrap
const SEEK_OVER_S = 0.25; // the compared video is this far off: seek it
const NUDGE_S = 0.3; // closer: its rate corrects the gap in about this long

const refView = $('compare-ref');
const takeView = $('compare-take');
const scrub = $('compare-scrub');

let recorder = null;
let current = null; // the take being recorded: {startMs, rate, endMs, kind, startedAt}
let lastPos = null; // the player's position at the last tick, to see a loop wrap
let compared = null; // the take in the compare box
let starting = false; // an armed take waits for the player to run
let lockFrame = 0; // the pending frame of lock(), one chain at a time
let nextId = 1;

/** recordingType is the best WebM the browser records, or '' for its default. */
function recordingType() {
  for (const t of ['video/webm;codecs=vp8', 'video/webm;codecs=vp9', 'video/webm']) {
    if (MediaRecorder.isTypeSupported(t)) return t;
  }
  return '';
}

/** cannotRecord is the sentence saying why a take cannot start now, or ''. */
function cannotRecord() {
  if (typeof MediaRecorder === 'undefined') return 'This browser cannot record video (it has no MediaRecorder), so takes are not available here. Your camera still shows beside the video.';
  if (!cameraStream()) return 'Turn on your camera first (“Turn on my camera”): a take records your camera.';
  if (!state.get('loaded')) return 'Pick your copy of the video first: a take is compared with it.';
  return '';
}

/** toggleRecord arms a take for the next loop start or count-in, or cancels or ends it. */
export function toggleRecord() {
  const now = state.get('takeStatus');
  if (now === 'recording') { stop('You stopped the take.'); return; }
  if (now === 'armed') { state.set({ takeStatus: 'idle', takeNote: 'The take was cancelled before it started.' }); return; }
  const why = cannotRecord();
  if (why) { state.set({ takeNote: why }); return; }
  state.set({ takeStatus: 'armed', takeNote: 'Ready: your take starts at the next loop start or count-in, and ends with that pass.' });
}

/** sectionEnd is where a take started at startMs by a count-in ends: the loop's end, the next mark, or the video's end. */
function sectionEnd(startMs) {
  const loop = state.get('loop');
  if (loop && startMs >= loop.startMs && startMs < loop.endMs) return loop.endMs;
  const next = sortedMarks(state.get('marks') || []).find((m) => m.positionMs > startMs + WRAP_NEAR_MS);
  return next ? next.positionMs : (video.duration || Infinity) * 1000;
}

/** start starts recording, stamped with where the video is and the room's speed. */
function start(kind, startMs) {
  const stream = cameraStream();
  if (!stream) { state.set({ takeStatus: 'idle', takeNote: 'Your camera went off, so the take did not start.' }); return; }
  const rate = state.get('playback')?.rate || 1;
  const type = recordingType();
  const chunks = [];
  let rec;
  try {
    rec = new MediaRecorder(stream, type ? { mimeType: type } : undefined);
  } catch (err) {
    state.set({ takeStatus: 'idle', takeNote: `The browser could not record your camera (${err.message}).` });
    return;
  }
  const take = { startMs, rate, kind, endMs: kind === 'loop' ? state.get('loop').endMs : sectionEnd(startMs), startedAt: new Date() };
  rec.addEventListener('dataavailable', (e) => { if (e.data.size) chunks.push(e.data); });
  rec.addEventListener('stop', () => keep(take, new Blob(chunks, { type: rec.mimeType || 'video/webm' })));
  rec.start();
  recorder = rec;
  current = take;
  state.set({ takeStatus: 'recording', takeNote: `Recording your take from ${fine(startMs)} at ${rate}×…` });
}

/** stop ends the take being recorded (it is kept), saying why. */
function stop(why) {
  if (!recorder) return;
  const rec = recorder;
  current.durationMs = Date.now() - current.startedAt.getTime();
  recorder = null;
  current = null;
  if (rec.state !== 'inactive') rec.stop();
  state.set({ takeStatus: 'idle', takeNote: why });
}

/** keep adds a recorded take to the list, letting the oldest go past KEEP. */
function keep(take, blob) {
  if (!blob.size) { state.set({ takeNote: 'The take recorded nothing (the camera sent no frames).' }); return; }
  const t = { ...take, id: nextId++, url: URL.createObjectURL(blob), size: blob.size, type: blob.type };
  const all = [t, ...(state.get('takes') || [])];
  for (const old of all.slice(KEEP)) {
    if (compared && compared.id === old.id) closeCompare();
    URL.revokeObjectURL(old.url);
  }
  state.set({ takes: all.slice(0, KEEP) });
}

/**
 * startAtPlay starts an armed take once the player runs from where it now is: a loop's wrap
 * is a seek and a count-in's end a play, and the take's first frame must meet the video's.
 */
function startAtPlay(kind) {
  if (starting) return;
  const go = () => { starting = false; if (state.get('takeStatus') === 'armed') start(kind, positionMs()); };
  if (video.seeking) { starting = true; video.addEventListener('seeked', go, { once: true }); } else if (video.paused) { starting = true; video.addEventListener('playing', go, { once: true }); } else go();
}

/** watch starts an armed take at a loop's start and ends a take at its pass's (or section's) end. */
function watch() {
  const status = state.get('takeStatus');
  if (!video.src || video.paused) {
    if (status === 'recording' && video.paused && !starting) stop('The video stopped, so the take ended there.');
    lastPos = null;
    return;
  }
  const loop = state.get('loop');
  const pos = positionMs(); // while seeking, where the seek goes
  const wrapped = !!loop && lastPos !== null && lastPos >= loop.endMs - WRAP_NEAR_MS && pos < loop.startMs + WRAP_NEAR_MS && pos < lastPos;
  lastPos = pos;
  if (status === 'armed' && wrapped) { startAtPlay('loop'); return; }
  if (status !== 'recording' || !current) return;
  if (Date.now() - current.startedAt.getTime() > MAX_TAKE_MS) stop(`A take is at most ${MAX_TAKE_MS / 60000} minutes; this one ended there.`);
  else if (current.kind === 'loop' && !loop) stop('The loop was cleared, so the take ended there.');
  else if (current.kind === 'loop' && wrapped) stop('Take recorded: one pass of the loop.');
  else if (current.kind === 'count' && (wrapped || pos >= current.endMs)) stop('Take recorded: the section after the count-in.');
}

/** seekable makes a recorded WebM seekable: a seek past its end makes the browser find its duration. */
function seekable(v) {
  return new Promise((resolve) => {
    const atStart = () => {
      v.addEventListener('seeked', function back() {
        if (v.currentTime > 0.001) return;
        v.removeEventListener('seeked', back);
        resolve(v.duration);
      });
      v.currentTime = 0;
    };
    const known = () => {
      if (!Number.isFinite(v.duration)) return;
      v.removeEventListener('durationchange', known);
      v.removeEventListener('timeupdate', known);
      atStart();
    };
    const go = () => {
      if (Number.isFinite(v.duration)) { atStart(); return; }
      v.addEventListener('durationchange', known);
      v.addEventListener('timeupdate', known);
      v.currentTime = 1e101;
    };
    if (v.readyState >= 1) go(); else v.addEventListener('loadedmetadata', go, { once: true });
  });
}

/** refAt is where the video is when the take is at takeS seconds. */
const refAt = (takeS) => compared.startMs / 1000 + takeS * compared.rate;

/** compare shows a take beside the video from where it began, paused at its start. */
async function compare(take) {
  closeCompare();
  if (!video.src) { state.set({ takeNote: 'Pick your copy of the video first: a take is compared with it.' }); return; }
  compared = take;
  const box = $('compare');
  box.hidden = false;
  box.dataset.ready = '';
  box.dataset.take = String(take.id);
  $('compare-title').textContent = `Take ${take.id}: from ${fine(take.startMs)} at ${take.rate}×, beside the video from there.`;
  refView.src = video.currentSrc || video.src;
  takeView.src = take.url;
  const [duration] = await Promise.all([seekable(takeView), new Promise((r) => {
    if (refView.readyState >= 1) r(); else refView.addEventListener('loadedmetadata', r, { once: true });
  })]);
  if (compared !== take) return;
  scrub.max = String(Math.round(duration * 1000));
  refView.playbackRate = take.rate;
  await seekBoth(0);
  if (compared !== take) return;
  box.dataset.ready = '1';
  lockFrame = requestAnimationFrame(lock);
}

/** seekBoth puts the take at ms and the video where it was then, both paused. */
function seekBoth(ms) {
  takeView.pause();
  refView.pause();
  const arrived = (v) => new Promise((r) => v.addEventListener('seeked', r, { once: true }));
  const both = Promise.all([arrived(takeView), arrived(refView)]);
  takeView.currentTime = ms / 1000;
  refView.currentTime = refAt(ms / 1000);
  return both.then(render);
}

/**
 * lock keeps the video on the take, every frame the page draws: the take plays at its own
 * pace (the camera's), and the video follows it at the take's speed, seeking when far and
 * nudging its rate when close, as the room's follower does.
 */
function lock() {
  if (!compared) return;
  const target = refAt(takeView.currentTime);
  if (takeView.paused || takeView.ended) {
    if (!refView.paused) refView.pause();
  } else if (!refView.seeking) {
    const drift = refView.currentTime - target;
    if (Math.abs(drift) > SEEK_OVER_S) {
      refView.currentTime = target;
    } else {
      refView.playbackRate = Math.min(compared.rate * 2, Math.max(compared.rate / 2, compared.rate - drift / NUDGE_S));
      if (refView.paused) refView.play().catch(() => {});
    }
  }
  if (!takeView.seeking) scrub.value = String(Math.round(takeView.currentTime * 1000));
  $('compare-at').textContent = `${fine(takeView.currentTime * 1000)} of the take · ${fine(target * 1000)} of the video`;
  lockFrame = requestAnimationFrame(lock);
}

/** playBoth plays (or pauses) the take and the video together, from the start once the take has ended. */
async function playBoth() {
  if (!compared || !$('compare').dataset.ready) return;
  if (!takeView.paused) { takeView.pause(); render(); return; }
  if (takeView.ended || takeView.currentTime >= takeView.duration - 0.05) await seekBoth(0);
  refView.playbackRate = compared.rate;
  await Promise.all([takeView.play(), refView.play()]).catch(() => {});
  render();
}

/** closeCompare empties the compare box. */
function closeCompare() {
  cancelAnimationFrame(lockFrame);
  compared = null;
  for (const v of [takeView, refView]) { v.pause(); v.removeAttribute('src'); v.load(); }
  $('compare').hidden = true;
  $('compare').dataset.ready = '';
  $('compare').dataset.take = '';
}

function render() {
  const status = state.get('takeStatus');
  $('take-record').textContent = { armed: 'Cancel the take', recording: 'Stop the take' }[status] || 'Record my take';
  $('take-record').setAttribute('aria-pressed', String(status !== 'idle'));
  $('take-note').textContent = state.get('takeNote') || '';
  $('takes').classList.toggle('recording', status === 'recording');
  const takes = state.get('takes') || [];
  $('take-list').replaceChildren(...takes.map((t) => el('li', { 'data-take': String(t.id) },
    el('span', { text: `Take ${t.id} · ${t.startedAt.toLocaleTimeString()} · from ${fine(t.startMs)} at ${t.rate}× · ${(t.durationMs / 1000).toFixed(1)} s ` }),
    el('button', { type: 'button', class: 'take-compare', text: 'Compare', onclick: () => compare(t) }),
    ' ',
    el('a', { href: t.url, download: `take-${t.id}-from-${clock(t.startMs).replace(':', 'm')}s-at-${t.rate}x.webm`, text: 'Download' }))));
  $('compare-play').textContent = takeView.paused ? 'Play both' : 'Pause both';
  for (const v of [refView, takeView]) v.classList.toggle('mirrored', v === refView ? !!state.get('mirrored') : !!state.get('cameraMirrored'));
}

state.set({ takeStatus: 'idle', takes: [], takeNote: '' });
state.subscribe(['takeStatus', 'takes', 'takeNote', 'mirrored', 'cameraMirrored'], render);
state.subscribe(['camera'], () => {
  if (state.get('camera') === 'on') return;
  if (state.get('takeStatus') === 'recording') stop('Your camera went off, so the take ended there.');
  else if (state.get('takeStatus') === 'armed') state.set({ takeStatus: 'idle', takeNote: 'Your camera went off, so the take was cancelled.' });
});
state.subscribe(['loaded'], () => { if (compared && !state.get('loaded')) closeCompare(); });
state.on('countInEnded', () => { if (state.get('takeStatus') === 'armed') startAtPlay('count'); });
onTick(watch);
$('take-record').addEventListener('click', toggleRecord);
$('compare-play').addEventListener('click', playBoth);
$('compare-close').addEventListener('click', closeCompare);
scrub.addEventListener('input', () => { if (compared && $('compare').dataset.ready) seekBoth(Number(scrub.value)); });
takeView.addEventListener('ended', render);
render();
