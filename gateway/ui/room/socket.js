// The room socket and its protocol: it connects (and reconnects with backoff), turns the
// frames it gets into the shared state, and sends the leader's controls.
//
// The leader's controls carry a ref, and the room answers each: an ack with the time the room
// applied it on its clock (so the leader counts a count-in from the same instant as every
// viewer, whose sync frame carries that time), or an error with the ref and a sentence. The
// page shows a control at once (control applies it to the state) and keeps what the room
// confirmed beside it; a refusal it did not predict rolls the page back to that (with the
// controls still unanswered on top) and shows the sentence.
//
// It owns the connection line (#conn) and nothing else on the page.
import { $, api, clientId, el, savedName, setStatus, socketURL } from '../common.js';
import { sampleOffset, serverNow } from './clock.js';
import { code, role, token } from './context.js';
import * as state from './state.js';

let ws = null;
let opened = false;
let failures = 0;
let retryTimer = 0;
let nextRef = 0; // every control carries the next ref
let pending = []; // [{ref, frame, at, local}] sent on this socket, no answer yet, in ref order
let confirmed = null; // the room's controlled state as the room confirmed it

/** endedSentence says why a room closed, for the reason the room gave. */
export function endedSentence(reason) {
  if (reason === 'expired') return 'This room has expired: nobody led it for a long while, so it was closed. Pick another room or open a new one.';
  if (reason === 'ended') return 'The leader ended this room. Pick another room or open a new one.';
  return 'This room does not exist or has closed. Pick another room or open a new one.';
}

// roomName is the name this page shows in the room's people list: the chat name when it fits
// the room's 80 bytes, else none (the room then says "Dancer N").
function roomName() {
  const n = savedName();
  return n && new TextEncoder().encode(n).length <= 80 ? n : undefined;
}

/** connect opens the room socket (again, after a blip). */
export function connect() {
  if (state.get('ended')) return;
  setStatus($('conn'), opened ? 'Reconnecting…' : 'Connecting…', 'warn');
  const s = new WebSocket(socketURL(`/rooms/${encodeURIComponent(code)}/websocket`, { role, clientId: clientId(), name: roomName(), token: token || undefined }));
  ws = s;
  pending = []; // a new session: its state says what the room applied
  let thisOpened = false;
  s.onopen = () => {
    thisOpened = opened = true;
    failures = 0;
    setStatus($('conn'), role === 'leader' ? 'Connected: you are leading.' : 'Connected: following the leader.', 'ok');
  };
  s.onmessage = (ev) => {
    let f;
    try { f = JSON.parse(ev.data); } catch { return; }
    onFrame(f);
  };
  s.onclose = async (ev) => {
    if (ws !== s) return;
    ws = null;
    if (ev.code === 4000) { state.set({ ended: endedSentence(ev.reason) }); return; }
    if (state.get('ended')) return;
    failures++;
    if (!thisOpened) {
      // Refused before it opened: the room may be gone, or the leader key refused (401).
      try {
        await api('GET', `/lobby/rooms/${encodeURIComponent(code)}`);
        if (role === 'leader' && failures >= 2) {
          state.set({ error: 'The room did not accept your leader key, so you are not leading. Open the room as a viewer instead.', leaderRefused: true });
          $('conn').replaceChildren(el('a', { href: `room.html?code=${encodeURIComponent(code)}&as=viewer`, text: 'Open this room as a viewer' }));
          return;
        }
      } catch (err) {
        if (err.status === 404) { state.set({ ended: endedSentence('') }); return; }
      }
    }
    const wait = Math.min(5000, 300 * 2 ** Math.min(failures, 5));
    setStatus($('conn'), `Disconnected. Reconnecting in ${Math.ceil(wait / 1000)} s…`, 'bad');
    retryTimer = setTimeout(connect, wait);
  };
}

state.subscribe(['ended'], () => {
  clearTimeout(retryTimer);
  setStatus($('conn'), 'Disconnected: the room is closed.', 'bad');
  if (ws) { try { ws.close(1000, 'room closed'); } catch { /* already closed */ } }
});

function send(frame) {
  if (!ws || ws.readyState !== WebSocket.OPEN) {
    state.set({ error: 'Not connected right now; that did not reach the viewers. It will once the page reconnects.' });
    return false;
  }
  ws.send(JSON.stringify(frame));
  return true;
}

const CONTROLLED = ['playback', 'loop', 'marks', 'formation', 'video'];

/** controlled is the part of the room the leader's controls change, as the state has it now. */
function controlled() {
  const r = {};
  for (const k of CONTROLLED) r[k] = state.get(k);
  return r;
}

/**
 * changesOf is what a control frame changes in a room r, applied as the room service applies
 * it (act.lua), stamped at (room clock). Values are new objects; r is not changed.
 */
export function changesOf(r, f, at) {
  switch (f.type) {
    case 'sync':
      return { playback: { playing: f.playing, positionMs: f.positionMs, at, rate: f.rate || 1, countIn: f.countIn || null } };
    case 'loop':
      return { loop: f.endMs ? { startMs: f.startMs, endMs: f.endMs } : null };
    case 'mark':
      return { marks: [...r.marks, { positionMs: f.positionMs, label: f.label, at, formation: r.marks.find((m) => m.positionMs === f.positionMs)?.formation ?? null }] };
    case 'markFormation':
      return { marks: r.marks.map((m) => (m.positionMs === f.positionMs ? { ...m, formation: f.formation ?? null } : m)) };
    case 'formation':
      return { formation: f.formation ?? null };
    case 'reload':
      if (!f.video) return {};
      // Another video: the room starts over with it (its marks and loop go, the rate stays).
      return { video: f.video, playback: { playing: false, positionMs: 0, at, rate: r.playback?.rate || 1, countIn: null }, marks: [], loop: null };
    default:
      return {};
  }
}

/**
 * control sends a leader's control with the next ref and shows it at once (the room's answer
 * confirms it, or rolls it back). False when it could not be sent.
 */
export function control(frame) {
  const ref = ++nextRef;
  if (!send({ ...frame, ref })) return false;
  const at = serverNow();
  const changes = changesOf(controlled(), frame, at);
  pending.push({ ref, frame, at, local: changes.playback });
  state.set(changes);
  return true;
}

/** optimistic is what the room confirmed with the controls still unanswered on top. */
function optimistic() {
  // The page's video is its own copy: what the page believes never changes what was confirmed.
  const s = { ...confirmed, video: confirmed.video && { ...confirmed.video } };
  for (const p of pending) {
    const c = changesOf(s, p.frame, p.at);
    Object.assign(s, c);
    p.local = c.playback;
  }
  return s;
}

/** acked records the room's ack: the control is confirmed, stamped with the room's time. */
function acked(f) {
  const i = pending.findIndex((p) => p.ref === f.ref);
  if (i < 0 || !confirmed) return;
  const [p] = pending.splice(i, 1);
  if (typeof f.at === 'number' && f.at > 0) {
    sampleOffset(f.at);
    p.at = f.at;
  }
  Object.assign(confirmed, changesOf(confirmed, p.frame, p.at));
  // The page's playback is this control's: take the room's stamp, so a count-in counts from
  // the instant every viewer counts from.
  if (p.local && state.get('playback') === p.local && p.local.at !== p.at) {
    state.set({ playback: { ...p.local, at: p.at } });
  }
}

/** refused rolls the page back from a control the room refused, and says why. */
function refused(f) {
  const i = pending.findIndex((p) => p.ref === f.ref);
  if (i >= 0 && confirmed) {
    pending.splice(i, 1);
    state.set(optimistic());
    state.emit('rolledBack');
  }
  state.set({ error: f.error || 'The room refused that.' });
}

// samePerson: one person is a role and a client id (a viewer's tabs are one person).
const samePerson = (a, b) => a.clientId === b.clientId && a.role === b.role;

function onFrame(f) {
  switch (f.type) {
    case 'state':
      // What the room confirms; controls still unanswered on this socket are re-sent by the
      // gateway after a re-attach, so the page keeps showing them.
      confirmed = {
        playback: f.playback || null, loop: f.loop || null, marks: f.marks || [], formation: f.formation ?? null, video: f.video || state.get('video'),
      };
      state.set({
        ...optimistic(), viewers: f.viewers ?? state.get('viewers'), leaderPresent: !!f.leaderPresent, people: f.people || [],
      });
      state.emit('session'); // a (re)opened session: the player checks its file, a leader re-asserts its player
      break;
    case 'sync':
      sampleOffset(f.at);
      if (role === 'viewer') {
        state.set({ playback: { playing: !!f.playing, positionMs: f.positionMs || 0, at: f.at, rate: f.rate || 1, countIn: f.countIn || null } });
      }
      break;
    case 'loop':
      state.set({ loop: f.endMs ? { startMs: f.startMs, endMs: f.endMs } : null });
      break;
    case 'markFormation':
      state.set({ marks: state.get('marks').map((m) => (m.positionMs === f.positionMs ? { ...m, formation: f.formation ?? null } : m)) });
      break;
    case 'mark':
      // The leader already shows its own marks (it applied them when sending).
      if (!state.get('marks').some((m) => m.positionMs === f.positionMs && m.label === f.label)) {
        state.set({ marks: [...state.get('marks'), f] });
      }
      break;
    case 'formation':
      state.set({ formation: f.formation ?? null });
      break;
    case 'reload':
      if (f.video) {
        // Another video: the room starts over with it, as the server reset it.
        state.set({
          video: f.video, playback: { playing: false, positionMs: 0, at: f.at, rate: state.get('playback')?.rate || 1, countIn: null }, marks: [], loop: null,
        });
        state.emit('switched');
      } else {
        state.emit('reloadAsked');
      }
      break;
    case 'occupancy':
      state.set({ viewers: f.viewers ?? 0, leaderPresent: !!f.leaderPresent });
      break;
    case 'join':
      state.set({ people: [...state.get('people').filter((p) => !samePerson(p, f)), { clientId: f.clientId, name: f.name, role: f.role, since: f.since }] });
      break;
    case 'leave':
      state.set({ people: state.get('people').filter((p) => !samePerson(p, f)) });
      break;
    case 'ended':
      state.set({ ended: endedSentence(f.reason) });
      break;
    case 'ack':
      acked(f);
      break;
    case 'error':
      if (typeof f.ref === 'number') refused(f);
      else state.set({ error: f.error || f.message || 'The room refused that.' });
      break;
    default:
  }
}
