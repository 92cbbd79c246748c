// The follower: a viewer's player steered toward the room's timeline (the leader's position,
// at the leader's rate, wrapped at the loop's end, held during a count-in), and the line
// under the player that says how it is going. Every 100 ms, and on every sync frame, it
// compares the player with the timeline and corrects drift: by seeking when far, by nudging
// playbackRate around the leader's when close.
//
// It owns #follow (the status line) and #start (the button shown when the browser wants a tap).
import { $, clock, setStatus } from '../common.js';
import { serverNow } from './clock.js';
import { role } from './context.js';
import { video } from './player.js';
import * as state from './state.js';
import { timeline } from './timeline.js';

const FOLLOW_MS = 100; // how often drift is checked
const SEEK_OVER_MS = 1000; // drift beyond this is fixed by seeking
const NUDGE_OVER_MS = 25; // drift beyond this is fixed by playbackRate
const SEEK_LEAD_MS = 80; // a seek lands a little ahead: the player takes time to resume

let drift = 0; // ms, player minus target; read by the status line and the tests

/** currentDrift is how far the viewer's player is from the timeline (ms, ahead positive). */
export const currentDrift = () => drift;

/** note writes the line under the player (kind: ok, warn or bad). */
export function note(text, kind) { setStatus($('follow'), text, kind); }

/** playNow starts the player, or shows "Start following" when the browser wants a tap first. */
export function playNow() {
  video.play().then(() => { $('start').hidden = true; }).catch((err) => {
    if (err.name === 'NotAllowedError') {
      $('start').hidden = false;
      note('Your browser wants a tap before playing: press Start following.', 'warn');
    }
  });
}

/** follow steers the viewer's player toward the room's timeline. */
function follow() {
  if (role !== 'viewer' || state.get('ended') || !video.src || video.readyState < 1) return;
  const p = state.get('playback');
  if (!p) { note('Waiting for the leader to start.', 'warn'); return; }
  const rate = p.rate || 1;
  const durMs = (video.duration || Infinity) * 1000;
  const tl = timeline(p, state.get('loop'), serverNow());
  const target = Math.min(tl.pos, durMs);
  drift = video.currentTime * 1000 - target;
  const counting = tl.beat !== undefined;
  if (!p.playing || counting || target >= durMs) {
    if (!video.paused) video.pause();
    video.playbackRate = rate;
    if (Math.abs(drift) > NUDGE_OVER_MS && !video.seeking) video.currentTime = target / 1000;
    let text = `Paused by the leader at ${clock(target)}.`;
    if (counting) text = `Counting in: the video starts in ${(tl.startsIn / 1000).toFixed(1)} s.`;
    else if (!p.playing && p.positionMs === 0) text = 'Waiting for the leader to start.';
    note(text, 'ok');
    return;
  }
  if (video.seeking) return;
  if (video.paused) {
    video.playbackRate = rate;
    video.currentTime = (target + SEEK_LEAD_MS * rate) / 1000;
    playNow();
    return;
  }
  if (Math.abs(drift) > SEEK_OVER_MS) {
    video.playbackRate = rate;
    video.currentTime = (target + SEEK_LEAD_MS * rate) / 1000;
  } else if (Math.abs(drift) > NUDGE_OVER_MS) {
    // Close the gap in about half a second, at the leader's rate.
    video.playbackRate = Math.min(rate * 2, Math.max(rate / 2, rate - drift / 500));
  } else {
    video.playbackRate = rate;
  }
  note(`Following the leader (${drift >= 0 ? '+' : ''}${Math.round(drift)} ms).`, 'ok');
}

if (role === 'viewer') {
  setInterval(follow, FOLLOW_MS);
  $('start').addEventListener('click', () => { follow(); playNow(); });
  state.subscribe(['playback'], () => follow());
  state.subscribe(['loaded'], () => { if (state.get('loaded')) follow(); });
}

state.on('fileAsked', (v) => {
  if (role === 'viewer') note(`Pick your copy of “${v.title}” to follow the leader.`, 'warn');
});
state.on('reloadAsked', () => {
  if (role === 'viewer' && video.src) $('follow').textContent = 'The leader asked everyone to reload the video; reloading.';
});
state.subscribe(['ended'], () => { $('follow').textContent = ''; });
