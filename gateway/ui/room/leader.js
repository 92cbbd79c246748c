// The leader's player controls: its player is the truth. Its play, pause, seek and end each
// send a sync frame (with the leader's speed), a heartbeat resends the position every second
// while it plays, and a leader back on the page (or back from a blip) puts its player where
// the room is, or re-asserts it. Also the room-wide buttons: ask everyone to reload, end the
// room.
//
// It owns #leader-controls' playback row (play, pause, ±5 s, the clock, the position slider),
// the hint above it (#leader-hint), #reload and #end.
import { $, api, clock, forgetLeaderToken } from '../common.js';
import { serverNow } from './clock.js';
import { code, role, token } from './context.js';
import { note } from './follow.js';
import { positionMs, seekTo, video } from './player.js';
import { control, endedSentence } from './socket.js';
import * as state from './state.js';
import { timeline } from './timeline.js';

const HEARTBEAT_MS = 1000; // resend the position while playing
const OWN = ['play', 'pause', 'back', 'fwd', 'seek', 'reload'];

let adopted = false; // took the room's saved position once, for this file

/** sendSync sends the leader's player as it is (with countIn: start playing after that count). */
export function sendSync(countIn) {
  if (role !== 'leader' || !video.src || video.readyState < 1) return;
  const frame = { type: 'sync', playing: !video.paused && !video.ended, positionMs: positionMs(), rate: state.get('leaderRate') || 1 };
  if (countIn && countIn.beats) { frame.playing = true; frame.countIn = countIn; }
  control(frame);
}

/** play starts the leader's player, saying so when the browser refuses. */
export function play() {
  video.play().catch((err) => state.set({ error: `The player refused to play: ${err.message}` }));
}

/** hint writes the line above the leader's controls. */
export function hint(text) { $('leader-hint').textContent = text; }

/** adopt puts the leader's player where the room is (after a reload of the page). */
function adopt() {
  const p = state.get('playback');
  if (adopted || !p || !video.src || video.readyState < 1) return;
  adopted = true;
  state.set({ leaderRate: p.rate || 1 });
  const target = timeline(p, state.get('loop'), serverNow()).pos;
  if (target > 0) video.currentTime = Math.min(target, video.duration * 1000 || target) / 1000;
  if (p.playing) video.play().catch(() => note('Press Play to continue leading.', 'warn'));
}

function updateClock() {
  $('clock').textContent = `${clock(video.currentTime * 1000)} / ${clock((video.duration || 0) * 1000)}`;
  if (document.activeElement !== $('seek')) $('seek').value = String(video.currentTime);
}

function enable(on) { for (const id of OWN) $(id).disabled = !on; }

if (role === 'leader') {
  $('leader-controls').hidden = false;
  enable(false);
  for (const ev of ['play', 'pause', 'seeked', 'ended']) video.addEventListener(ev, () => sendSync());
  video.addEventListener('timeupdate', updateClock);
  setInterval(() => { if (!video.paused) sendSync(); }, HEARTBEAT_MS);
  $('play').addEventListener('click', play);
  $('pause').addEventListener('click', () => video.pause());
  $('back').addEventListener('click', () => seekTo(positionMs() - 5000));
  $('fwd').addEventListener('click', () => seekTo(positionMs() + 5000));
  $('seek').addEventListener('input', () => { $('clock').textContent = `${clock($('seek').value * 1000)} / ${clock((video.duration || 0) * 1000)}`; });
  $('seek').addEventListener('change', () => seekTo($('seek').value * 1000));
  $('reload').addEventListener('click', () => control({ type: 'reload' }));
  $('end').addEventListener('click', async () => {
    if (!confirm('End this room for everyone? Viewers will be told it ended.')) return;
    try {
      await api('DELETE', `/lobby/rooms/${encodeURIComponent(code)}`, undefined, { Authorization: `Bearer ${token}` });
      state.set({ ended: endedSentence('ended') });
    } catch (err) {
      state.set({ error: err.message });
    }
  });
  state.subscribe(['loaded'], () => {
    const f = state.get('loaded');
    enable(!!f);
    if (!f) { adopted = false; return; }
    hint(`Leading with ${f.name}. Viewers follow what your player does.`);
    $('seek').max = String(video.duration || 0);
    adopt();
  });
  state.on('session', () => { if (adopted) sendSync(); else adopt(); });
  state.on('fileAsked', () => hint('Pick your copy of the video to start leading. Viewers follow what your player does.'));
  state.subscribe(['ended', 'leaderRefused'], () => {
    $('leader-controls').hidden = true;
    if (state.get('ended')) forgetLeaderToken(code);
  });
}
