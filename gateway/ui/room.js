// The practice room page: room.html?code=<code>. The browser that created the room holds its
// leader token and leads; everyone else follows. Each person picks their own copy of the video
// (played from a blob: URL, never uploaded). The leader's player is the truth: its play, pause
// and seek events, and a heartbeat every second while playing, go out as sync frames that the
// server stamps with its clock ("at"). A viewer aims at positionMs + (serverNow - at) and
// corrects drift: by nudging playbackRate when close, by seeking when far. The leader also
// sets the formation (formation.js) and can switch everyone to another video: a reload frame
// with the new video's title and length, after which each viewer picks their own copy.
//
// The practice tools: the leader sets the speed (sync frames carry the rate, and a viewer aims
// at positionMs + (serverNow - at) * rate), an A-B loop (room state: every page wraps at its
// end on the same clock), a count-in (a sync with countIn: every page counts the same beats on
// the room's clock and the video starts on the beat after), and a formation for each mark (the
// stage shows the formation of the mark playback last passed, moving each dancer in a straight
// line towards the next mark's formation). Mirroring is each person's own choice, kept on
// their device.
//
// The leader's controls carry a ref, and the room answers each: an ack with the time the room
// applied it on its clock (so the leader counts a count-in from the same instant as every
// viewer, whose sync frame carries that time), or an error with the ref and a sentence. The
// leader's page shows a control at once and keeps what the room confirmed beside it; a refusal
// it did not predict rolls the page back to that (with the controls still unanswered on top)
// and shows the sentence.
import {
  $, ChatPanel, api, clientId, clock, el, forgetLeaderToken, leaderToken, saveName, savedName, setStatus, socketURL,
} from './common.js';
import {
  DEFAULT_GRID, Stage, axisError, emptyFormation, firstFree, formationAt, formationError, gridError, nameError, place,
  remove, resize,
} from './formation.js';

const HEARTBEAT_MS = 1000; // leader: resend position while playing
const FOLLOW_MS = 100; // viewer: how often drift is checked
const SEEK_OVER_MS = 1000; // drift beyond this is fixed by seeking
const NUDGE_OVER_MS = 25; // drift beyond this is fixed by playbackRate
const SEEK_LEAD_MS = 80; // a seek lands a little ahead: the player takes time to resume
const TICK_MS = 20; // every page: count-in, loop end, the stage between marks
const COUNT_LEAD_MS = 500; // a count's first beat comes this long after its stamp: every page has the frame by then
const MAX_MARKS = 200; // the room's limit (docs/API.md)
const MIRROR_KEY = 'vigil.mirror';

const params = new URLSearchParams(location.search);
const code = (params.get('code') || '').trim().toLowerCase();
const token = params.get('as') === 'viewer' ? '' : leaderToken(code);
const role = token ? 'leader' : 'viewer';
const video = $('player');

const room = {
  playback: null, // {playing, positionMs, at, rate, countIn: {beats, bpm} | null}
  loop: null, // {startMs, endMs}
  marks: [],
  video: null, // {title, durationMs}
  viewers: 0,
  leaderPresent: false,
  formation: null,
  people: [], // who is here: [{clientId, name, role, since}], in order of arrival
};
let ws = null;
let nextRef = 0; // the leader's controls: every one carries the next ref
let pending = []; // [{ref, frame, at, local}] sent on this socket, no answer yet, in ref order
let confirmed = null; // the room's controlled state as the room confirmed it (see applyControl)
let ended = false;
let opened = false;
let failures = 0;
let retryTimer = 0;
let adopted = false; // leader: took the room's saved position once
let fileName = '';
let playerVideo = null; // the room video the loaded file was picked for ({title, durationMs})

// Server clock: offset = serverTime - localTime. A sync frame stamped at `at` and received now
// gives at - now = offset - latency, so the largest recent sample is the best estimate.
const offsetSamples = [];
let offset = 0;
function sampleOffset(at) {
  if (typeof at !== 'number') return;
  offsetSamples.push(at - Date.now());
  if (offsetSamples.length > 30) offsetSamples.shift();
  offset = Math.max(...offsetSamples);
}
const serverNow = () => Date.now() + offset;

// ---- the room's timeline --------------------------------------------------------------

/** countMs is how long a count-in lasts (the server's rounding). */
const countMs = (c) => (c && c.beats && c.bpm ? Math.floor((c.beats * 60000 + Math.floor(c.bpm / 2)) / c.bpm) : 0);

/** countStart is when a count-in's first beat sounds on the room's clock. */
const countStart = (p) => p.at + COUNT_LEAD_MS;

/**
 * timeline is where the room's video is at server time t: {pos} (ms), with {beat, beats,
 * startsIn} while a count-in runs (beat 0 before its first beat, then 1..beats). Playing, the
 * video starts at at (or on the beat after the count-in) and runs at the rate; passing the
 * loop's end from before it, it goes on from the loop's start.
 */
function timeline(p, loop, t) {
  if (!p) return { pos: 0 };
  if (!p.playing) return { pos: p.positionMs };
  const c = p.countIn;
  const start = c ? countStart(p) + countMs(c) : p.at;
  if (c && t < start) {
    const beat = Math.min(c.beats, Math.max(0, Math.floor(((t - countStart(p)) * c.bpm) / 60000) + 1));
    return { pos: p.positionMs, beat, beats: c.beats, startsIn: start - t };
  }
  // A stamp a little ahead of this page's idea of the room's clock (its offset is measured
  // from frames that took time to arrive) is now, not a moment to wait for.
  let pos = p.positionMs + Math.max(0, t - start) * (p.rate || 1);
  if (loop && p.positionMs < loop.endMs && pos >= loop.endMs) {
    pos = loop.startMs + ((pos - loop.endMs) % (loop.endMs - loop.startMs));
  }
  return { pos };
}

/** countWord is what a page shows on beat k of n: the count ends on 8 ("5, 6, 7, 8"). */
const countWord = (k, n) => String((((8 - n + k - 1) % 8) + 8) % 8 + 1);
// ---- rendering -------------------------------------------------------------------------

function renderInfo() {
  const v = room.video;
  const parts = [];
  if (v) parts.push(`Video: ${v.title} (${clock(v.durationMs)})`);
  parts.push(`Room code: ${code}`);
  parts.push(role === 'leader' ? 'You lead this room.' : 'You follow the leader.');
  $('room-info').textContent = parts.join(' · ');
}

function renderOccupancy() {
  const n = room.viewers;
  $('occupancy').textContent = `${n} viewer${n === 1 ? '' : 's'} · leader ${room.leaderPresent ? 'present' : 'away'}`;
}

// samePerson: one person is a role and a client id (a viewer's tabs are one person).
const samePerson = (a, b) => a.clientId === b.clientId && a.role === b.role;

function renderPeople() {
  const list = $('people');
  const me = clientId();
  list.replaceChildren(...room.people.map((p) => {
    const li = el('li', { class: p.role === 'leader' ? 'leader' : 'viewer' });
    li.dataset.clientId = p.clientId;
    li.append(el('span', { class: 'who', text: p.name }));
    const tags = [];
    if (p.role === 'leader') tags.push('leader');
    if (p.clientId === me && p.role === role) tags.push('you');
    if (tags.length) li.append(el('span', { class: 'muted', text: ` (${tags.join(', ')})` }));
    return li;
  }));
  $('people-count').textContent = String(room.people.length);
}
/** fine renders a position to the tenth of a second (m:ss.t), as loops are set. */
function fine(ms) { return `${clock(ms)}.${Math.floor((Math.max(0, ms) % 1000) / 100)}`; }

const markLabel = (m) => `${clock(m.positionMs)}${m.label ? ' ' + m.label : ''}`;

function renderMarks() {
  const list = $('marks');
  list.replaceChildren(...room.marks.map((m) => {
    const label = `${markLabel(m)}${validFormation(m.formation) ? ' · formation' : ''}`;
    if (role === 'leader') {
      return el('li', {}, el('button', { type: 'button', text: label, 'aria-label': `Go to mark ${label}`, onclick: () => seekTo(m.positionMs) }));
    }
    return el('li', { text: label });
  }));
  $('no-marks').hidden = room.marks.length > 0;
  if (role === 'leader') fillLoopChoices();
}

const stage = new Stage($('formation-stage'), {
  editable: role === 'leader',
  onChange: (f, what) => setFormation(f, what),
  onSelect: (d) => {
    $('dancer-name').value = d.name;
    $('dancer-x').value = String(d.x);
    $('dancer-y').value = String(d.y);
  },
  onError: (msg) => { $('formation-error').textContent = msg; },
});

const validFormation = (f) => (f !== null && f !== undefined && !formationError(f) ? f : null);

/** shownFormation is the room's default formation when it is one the stage can draw, else null. */
function shownFormation() { return validFormation(room.formation); }

const sortedMarks = () => [...room.marks].sort((a, b) => a.positionMs - b.positionMs);

/** playheadMs is where this page's video is (the room's timeline before a file is picked). */
function playheadMs() {
  if (video.src && video.readyState >= 1) return video.currentTime * 1000;
  return timeline(room.playback, room.loop, serverNow()).pos;
}

/** heldAt is the formation in force at ms, without moving: the last mark's at or before it, else the default. */
function heldAt(ms) {
  let f = shownFormation();
  for (const m of sortedMarks()) {
    if (m.positionMs > ms) break;
    if (validFormation(m.formation)) f = m.formation;
  }
  return f;
}

/** editMark is the mark whose formation the leader edits: the last at or before the playhead (null: the default). */
function editMark() {
  const pos = playheadMs() + 50; // a seek to a mark may land a frame short of it
  let mark = null;
  for (const m of sortedMarks()) if (m.positionMs <= pos) mark = m;
  return mark;
}

/** editedFormation is what the leader's editor changes: the mark's formation, or what it inherits. */
function editedFormation() {
  const m = editMark();
  return m ? validFormation(m.formation) || heldAt(m.positionMs) : shownFormation();
}

/** stageFormation is what the stage shows now: moving with playback, or (a paused leader) what is edited. */
function stageFormation() {
  if (role === 'leader' && (video.paused || !video.src)) return editedFormation();
  return formationAt(room.marks, shownFormation(), playheadMs());
}

let stageKey = '';
/** renderStage redraws the stage when what it shows changed (every tick while dancers move). */
function renderStage(force) {
  const drawn = stageFormation() || (role === 'leader' ? emptyFormation(currentGrid()) : null);
  $('formation-stage').hidden = !drawn;
  const key = drawn ? JSON.stringify(drawn) : '';
  if (drawn && (force || key !== stageKey)) {
    stage.render(drawn);
    $('formation-stage').dataset.playhead = String(Math.round(playheadMs())); // what the drawing is of
  }
  stageKey = key;
  if (role === 'leader') {
    const m = editMark();
    const text = m
      ? `Editing the formation of mark ${markLabel(m)} (the mark at or before the playhead)${validFormation(m.formation) ? '' : ': it has none of its own yet, so this starts from the one before it'}.`
      : 'Editing the default formation: the one shown before the first mark that has a formation.';
    if ($('formation-target').textContent !== text) $('formation-target').textContent = text;
  }
  return drawn;
}

function renderFormation() {
  const f = room.formation;
  const has = f !== null && f !== undefined;
  const ok = shownFormation();
  // A formation in another shape (sent by a script) is shown as it is, not lost.
  $('formation-raw').hidden = !has || !!ok;
  $('formation-raw').textContent = has && !ok ? JSON.stringify(f, null, 2) : '';
  const drawn = renderStage(true);
  const marked = room.marks.filter((m) => validFormation(m.formation)).length;
  let text;
  if (drawn && drawn.dancers.length) text = `${drawn.dancers.length} dancer${drawn.dancers.length === 1 ? '' : 's'} on the stage (${drawn.grid.cols} columns × ${drawn.grid.rows} rows).`;
  else if (has && !ok) text = `The leader's formation is not a stage of dancers (${formationError(f)}); here it is as sent.`;
  else text = role === 'leader' ? 'No formation yet: place the first dancer.' : 'No formation yet.';
  if (marked) text += ` ${marked} mark${marked === 1 ? ' has its' : 's have their'} own formation: the stage follows the video.`;
  $('formation-status').textContent = text;
  if (role === 'leader') {
    const g = currentGrid();
    $('dancer-x').max = String(g.cols);
    $('dancer-y').max = String(g.rows);
    if (document.activeElement !== $('grid-cols')) $('grid-cols').value = String(g.cols);
    if (document.activeElement !== $('grid-rows')) $('grid-rows').value = String(g.rows);
  }
}

/** currentGrid is the stage size the leader edits on. */
function currentGrid() { return editedFormation()?.grid || stage.formation?.grid || DEFAULT_GRID; }

function showError(msg) { $('room-error').textContent = msg || ''; }

function showEnded(text) {
  ended = true;
  clearTimeout(retryTimer);
  $('ended-text').textContent = text;
  $('ended').hidden = false;
  setStatus($('conn'), 'Disconnected: the room is closed.', 'bad');
  $('leader-controls').hidden = true;
  $('player-controls').hidden = true;
  $('formation-editor').hidden = true;
  $('switch-notice').textContent = '';
  $('file').disabled = true;
  $('occupancy').textContent = 'Room closed.';
  $('follow').textContent = '';
  video.pause();
  if (ws) { try { ws.close(1000, 'room closed'); } catch { /* already closed */ } }
  if (role === 'leader') forgetLeaderToken(code);
}

function endedSentence(reason) {
  if (reason === 'expired') return 'This room has expired: nobody led it for a long while, so it was closed. Pick another room or open a new one.';
  if (reason === 'ended') return 'The leader ended this room. Pick another room or open a new one.';
  return 'This room does not exist or has closed. Pick another room or open a new one.';
}

// ---- socket ----------------------------------------------------------------------------

// roomName is the name this page shows in the room's people list: the chat name when it fits
// the room's 80 bytes, else none (the room then says "Dancer N").
function roomName() {
  const n = savedName();
  return n && new TextEncoder().encode(n).length <= 80 ? n : undefined;
}

function connect() {
  if (ended) return;
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
    if (ev.code === 4000) { showEnded(endedSentence(ev.reason)); return; }
    if (ended) return;
    failures++;
    if (!thisOpened) {
      // Refused before it opened: the room may be gone, or the leader key refused (401).
      try {
        await api('GET', `/lobby/rooms/${encodeURIComponent(code)}`);
        if (role === 'leader' && failures >= 2) {
          showError('The room did not accept your leader key, so you are not leading. Open the room as a viewer instead.');
          $('leader-controls').hidden = true;
          $('conn').replaceChildren(el('a', { href: `room.html?code=${encodeURIComponent(code)}&as=viewer`, text: 'Open this room as a viewer' }));
          return;
        }
      } catch (err) {
        if (err.status === 404) { showEnded(endedSentence('')); return; }
      }
    }
    const wait = Math.min(5000, 300 * 2 ** Math.min(failures, 5));
    setStatus($('conn'), `Disconnected. Reconnecting in ${Math.ceil(wait / 1000)} s…`, 'bad');
    retryTimer = setTimeout(connect, wait);
  };
}

function send(frame) {
  if (!ws || ws.readyState !== WebSocket.OPEN) {
    showError('Not connected right now; that did not reach the viewers. It will once the page reconnects.');
    return false;
  }
  ws.send(JSON.stringify(frame));
  return true;
}

// ---- the leader's controls: shown at once, confirmed (or refused) by the room ----------------

/** copyControlled is the part of a room state the leader's controls change (marks copied). */
function copyControlled(r) {
  return { playback: r.playback, loop: r.loop, marks: r.marks.map((m) => ({ ...m })), formation: r.formation, video: r.video && { ...r.video } };
}

/**
 * applyControl applies a control frame to a room state as the room service does (act.lua),
 * stamped at (room clock), and returns the playback it set, if any.
 */
function applyControl(r, f, at) {
  switch (f.type) {
    case 'sync':
      r.playback = { playing: f.playing, positionMs: f.positionMs, at, rate: f.rate || 1, countIn: f.countIn || null };
      return r.playback;
    case 'loop':
      r.loop = f.endMs ? { startMs: f.startMs, endMs: f.endMs } : null;
      break;
    case 'mark':
      r.marks.push({ positionMs: f.positionMs, label: f.label, at, formation: r.marks.find((m) => m.positionMs === f.positionMs)?.formation ?? null });
      break;
    case 'markFormation':
      for (const m of r.marks) if (m.positionMs === f.positionMs) m.formation = f.formation ?? null;
      break;
    case 'formation':
      r.formation = f.formation ?? null;
      break;
    case 'reload':
      if (!f.video) break;
      // Another video: the room starts over with it (its marks and loop go, the rate stays).
      r.video = f.video;
      r.playback = { playing: false, positionMs: 0, at, rate: r.playback?.rate || 1, countIn: null };
      r.marks = [];
      r.loop = null;
      return r.playback;
    default:
  }
  return undefined;
}

/**
 * control sends a leader's control with the next ref and shows it at once (the room's answer
 * confirms it, or rolls it back). False when it could not be sent.
 */
function control(frame) {
  const ref = ++nextRef;
  if (!send({ ...frame, ref })) return false;
  const at = serverNow();
  const local = applyControl(room, frame, at);
  pending.push({ ref, frame, at, local });
  return true;
}

/** showControlled puts a controlled state on the page (the leader's player takes its rate). */
function showControlled(s) {
  Object.assign(room, s);
  if (role === 'leader') {
    leaderRate = room.playback?.rate || 1;
    video.defaultPlaybackRate = leaderRate;
    if (!video.paused) video.playbackRate = leaderRate;
  }
  renderInfo(); renderMarks(); renderFormation(); renderPractice();
}

/** optimistic is what the room confirmed with the controls still unanswered on top. */
function optimistic() {
  const s = copyControlled(confirmed);
  for (const p of pending) p.local = applyControl(s, p.frame, p.at);
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
  applyControl(confirmed, p.frame, p.at);
  // The page's playback is this control's: take the room's stamp, so a count-in counts from
  // the instant every viewer counts from.
  if (p.local && room.playback === p.local && p.local.at !== p.at) {
    room.playback = { ...p.local, at: p.at };
    scheduleBeats();
    renderPractice();
  }
}

/** refused rolls the page back from a control the room refused, and says why. */
function refused(f) {
  const i = pending.findIndex((p) => p.ref === f.ref);
  if (i >= 0 && confirmed) {
    pending.splice(i, 1);
    showControlled(optimistic());
  }
  showError(f.error || 'The room refused that.');
}

function onFrame(f) {
  switch (f.type) {
    case 'state':
      // What the room confirms; controls still unanswered on this socket are re-sent by the
      // gateway after a re-attach, so the page keeps showing them.
      confirmed = {
        playback: f.playback || null, loop: f.loop || null, marks: f.marks || [], formation: f.formation ?? null, video: f.video || room.video,
      };
      Object.assign(room, optimistic());
      room.viewers = f.viewers ?? room.viewers;
      room.leaderPresent = !!f.leaderPresent;
      room.people = f.people || [];
      renderInfo(); renderOccupancy(); renderMarks(); renderFormation(); renderPeople(); renderPractice();
      // Back from a blip after the leader switched videos: the file in the player is the old one.
      if (playerVideo && room.video && !sameVideo(playerVideo, room.video)) askForFile();
      checkFile();
      // A leader back from a blip re-asserts its player; a fresh page takes the room's state.
      if (role === 'leader') { if (adopted) sendSync(); else adopt(); }
      break;
    case 'sync':
      sampleOffset(f.at);
      if (role === 'viewer') {
        room.playback = { playing: !!f.playing, positionMs: f.positionMs || 0, at: f.at, rate: f.rate || 1, countIn: f.countIn || null };
        renderPractice();
        follow();
      }
      break;
    case 'loop':
      room.loop = f.endMs ? { startMs: f.startMs, endMs: f.endMs } : null;
      renderPractice();
      break;
    case 'markFormation':
      for (const m of room.marks) if (m.positionMs === f.positionMs) m.formation = f.formation ?? null;
      renderMarks(); renderFormation();
      break;
    case 'mark':
      // The leader already shows its own marks (see the mark form).
      if (!room.marks.some((m) => m.positionMs === f.positionMs && m.label === f.label)) {
        room.marks.push(f);
        renderMarks();
      }
      break;
    case 'formation':
      room.formation = f.formation ?? null;
      renderFormation();
      break;
    case 'reload':
      if (f.video) switched(f);
      else if (role === 'viewer') reloadPlayer();
      break;
    case 'occupancy':
      room.viewers = f.viewers ?? 0;
      room.leaderPresent = !!f.leaderPresent;
      renderOccupancy();
      break;
    case 'join':
      room.people = room.people.filter((p) => !samePerson(p, f));
      room.people.push({ clientId: f.clientId, name: f.name, role: f.role, since: f.since });
      renderPeople();
      break;
    case 'leave':
      room.people = room.people.filter((p) => !samePerson(p, f));
      renderPeople();
      break;
    case 'ended':
      showEnded(endedSentence(f.reason));
      break;
    case 'ack':
      acked(f);
      break;
    case 'error':
      if (typeof f.ref === 'number') refused(f);
      else showError(f.error || f.message || 'The room refused that.');
      break;
    default:
  }
}

// ---- the video file --------------------------------------------------------------------

$('file').addEventListener('change', () => {
  const f = $('file').files[0];
  if (!f) return;
  if (video.src) URL.revokeObjectURL(video.src);
  loadFile(f);
});

/** loadFile plays a picked file, for the room's current video. */
function loadFile(f) {
  if (video.src) URL.revokeObjectURL(video.src);
  fileName = f.name;
  adopted = false;
  playerVideo = room.video;
  $('switch-notice').textContent = '';
  video.src = URL.createObjectURL(f);
  video.load();
}

const sameVideo = (a, b) => !!a && !!b && a.title === b.title && a.durationMs === b.durationMs;

/** askForFile empties the player and asks for a copy of the room's (new) video. */
function askForFile() {
  if (video.src) URL.revokeObjectURL(video.src);
  video.removeAttribute('src');
  video.load();
  playerVideo = null;
  $('file').value = '';
  const v = room.video;
  $('switch-notice').textContent = `The leader switched to another video: “${v.title}” (${clock(v.durationMs)}). Pick your copy of it above to keep ${role === 'leader' ? 'leading' : 'following'}.`;
  if (role === 'leader') {
    setLeaderEnabled(false);
    $('leader-hint').textContent = 'Pick your copy of the video to start leading. Viewers follow what your player does.';
  } else {
    setStatus($('follow'), `Pick your copy of “${v.title}” to follow the leader.`, 'warn');
  }
}

/** switched applies a reload frame that carries a video: the room starts over with it. */
function switched(f) {
  room.video = f.video;
  room.playback = { playing: false, positionMs: 0, at: f.at, rate: room.playback?.rate || 1, countIn: null }; // as the server reset it
  room.marks = []; // the server drops the old video's marks, their formations and the loop
  room.loop = null;
  renderInfo(); renderMarks(); renderPractice();
  askForFile();
}

video.addEventListener('loadedmetadata', () => {
  if (!video.src) return;
  checkFile();
  if (role === 'leader') {
    $('leader-hint').textContent = `Leading with ${fileName}. Viewers follow what your player does.`;
    setLeaderEnabled(true);
    $('seek').max = String(video.duration || 0);
    adopt();
  } else {
    follow();
  }
});

video.addEventListener('error', () => {
  showError('This browser cannot play that file. Pick another copy of the video (WebM or MP4 usually work).');
});

/** checkFile warns when the picked file's length differs from the room's video. */
function checkFile() {
  const w = $('file-warning');
  if (!room.video || !Number.isFinite(video.duration) || !video.duration) { w.textContent = ''; return; }
  const diff = Math.abs(video.duration * 1000 - room.video.durationMs);
  w.textContent = diff > 2000
    ? `Your file is ${clock(video.duration * 1000)} long but the room's video is ${clock(room.video.durationMs)}: check that it is the same video.`
    : '';
}

function reloadPlayer() {
  if (!video.src) return;
  $('switch-notice').textContent = '';
  const note = $('follow');
  note.textContent = 'The leader asked everyone to reload the video; reloading.';
  const src = video.src;
  video.removeAttribute('src');
  video.load();
  video.src = src;
  video.load();
}

// ---- leader ----------------------------------------------------------------------------

function setLeaderEnabled(on) {
  for (const id of ['play', 'pause', 'back', 'fwd', 'seek', 'mark', 'mark-label', 'rate', 'loop-set', 'loop-clear', 'count-play']) $(id).disabled = !on;
  for (const b of document.querySelectorAll('#speed-presets button')) b.disabled = !on;
}

/**
 * setFormation sends a new formation: the formation of the mark at or before the playhead, or
 * the default one before any mark; the stage shows it once it is sent.
 */
function setFormation(f, what) {
  $('formation-error').textContent = '';
  const err = formationError(f);
  if (err) { $('formation-error').textContent = err; renderFormation(); return false; }
  const m = editMark();
  const frame = m ? { type: 'markFormation', positionMs: m.positionMs, formation: f } : { type: 'formation', formation: f };
  if (!control(frame)) { renderFormation(); return false; }
  if (m) renderMarks();
  renderFormation();
  $('formation-status').textContent = `Sent: ${what}. ${$('formation-status').textContent}`;
  return true;
}

/** formNumber reads a number field: null when empty, NaN when not a whole number. */
function formNumber(id) {
  const raw = $(id).value.trim();
  if (raw === '') return null;
  return /^\d+$/.test(raw) ? Number(raw) : NaN;
}

function formationForm() {
  const fail = (msg, id) => { $('formation-error').textContent = msg; $(id).focus(); };
  $('dancer-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const cur = editedFormation() || emptyFormation(currentGrid());
    const name = $('dancer-name').value.trim();
    const nerr = nameError(name);
    if (nerr) { fail(nerr, 'dancer-name'); return; }
    let x = formNumber('dancer-x');
    let y = formNumber('dancer-y');
    const existing = cur.dancers.find((d) => d.name === name);
    if (x === null && y === null) {
      // No spot given: a dancer on the stage stays, a new one takes the first free spot.
      const spot = existing || firstFree(cur);
      if (!spot) { fail(`The stage is full: every one of its ${cur.grid.cols * cur.grid.rows} spots is taken.`, 'dancer-name'); return; }
      ({ x, y } = spot);
    }
    const xerr = axisError('Column', x ?? NaN, cur.grid.cols);
    if (xerr) { fail(xerr, 'dancer-x'); return; }
    const yerr = axisError('Row', y ?? NaN, cur.grid.rows);
    if (yerr) { fail(yerr, 'dancer-y'); return; }
    const r = place(cur, name, x, y);
    if (r.error) { fail(r.error, 'dancer-name'); return; }
    if (setFormation(r.formation, `${name} to column ${x}, row ${y}`)) {
      for (const id of ['dancer-name', 'dancer-x', 'dancer-y']) $(id).value = '';
      $('dancer-name').focus();
    }
  });
  $('dancer-remove').addEventListener('click', () => {
    const cur = editedFormation() || emptyFormation(currentGrid());
    const name = $('dancer-name').value.trim();
    if (!name) { fail('Type the name of the dancer to remove (or pick them on the stage).', 'dancer-name'); return; }
    const r = remove(cur, name);
    if (r.error) { fail(r.error, 'dancer-name'); return; }
    if (setFormation(r.formation, `${name} off the stage`)) for (const id of ['dancer-name', 'dancer-x', 'dancer-y']) $(id).value = '';
  });
  $('grid-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const cur = editedFormation() || emptyFormation(currentGrid());
    const cols = formNumber('grid-cols');
    const rows = formNumber('grid-rows');
    const gerr = gridError({ cols: cols ?? NaN, rows: rows ?? NaN });
    if (gerr) { fail(gerr, Number.isInteger(cols) && cols >= 1 && cols <= 16 ? 'grid-rows' : 'grid-cols'); return; }
    const r = resize(cur, cols, rows);
    if (r.error) { fail(r.error, 'grid-cols'); return; }
    setFormation(r.formation, `a stage of ${cols} × ${rows}`);
  });
}

/** switchForm lets the leader move everyone to another video file. */
function switchForm() {
  let picked = null; // {file, durationMs}
  const err = $('switch-error');
  $('switch-file').addEventListener('change', () => {
    err.textContent = '';
    picked = null;
    $('switch-length').textContent = '';
    const f = $('switch-file').files[0];
    if (!f) return;
    $('switch-title').value = f.name.replace(/\.[^.]+$/, '').slice(0, 200);
    const probe = document.createElement('video');
    probe.preload = 'metadata';
    const url = URL.createObjectURL(f);
    probe.onloadedmetadata = () => {
      URL.revokeObjectURL(url);
      if (!Number.isFinite(probe.duration) || probe.duration <= 0) {
        err.textContent = 'This browser cannot tell how long that video is. Pick another file (WebM or MP4 usually work).';
        return;
      }
      picked = { file: f, durationMs: Math.round(probe.duration * 1000) };
      $('switch-length').textContent = `Length: ${clock(picked.durationMs)}`;
    };
    probe.onerror = () => {
      URL.revokeObjectURL(url);
      err.textContent = 'This browser cannot play that file. Pick another copy of the video (WebM or MP4 usually work).';
    };
    probe.src = url;
  });
  $('switch-form').addEventListener('submit', (e) => {
    e.preventDefault();
    err.textContent = '';
    const title = $('switch-title').value.trim();
    if (!picked) { err.textContent = 'Pick the video file first: its length is read from it.'; $('switch-file').focus(); return; }
    if (!title || [...title].length > 200 || /\p{Cc}/u.test(title)) {
      err.textContent = 'Give the video a title of 1–200 characters.';
      $('switch-title').focus();
      return;
    }
    if (picked.durationMs > 24 * 3600 * 1000) { err.textContent = 'A video can be at most 24 hours long.'; return; }
    const next = { title, durationMs: picked.durationMs };
    if (!control({ type: 'reload', video: next })) return;
    renderInfo(); renderMarks(); renderPractice();
    setLeaderEnabled(false);
    loadFile(picked.file);
    const named = new DataTransfer(); // "your copy" now names the new file
    named.items.add(picked.file);
    $('file').files = named.files;
    $('switch').open = false;
    $('switch-file').value = '';
    $('switch-title').value = '';
    $('switch-length').textContent = '';
    picked = null;
    $('leader-hint').textContent = `Switched everyone to “${title}”. Viewers are asked to pick their copy.`;
  });
}

function positionMs() { return Math.round(video.currentTime * 1000); }

let leaderRate = 1; // the rate the leader picked
let countTimer = 0; // a count-in's start, scheduled to the millisecond
let countFor = null; // the playback it was scheduled for

/** sendSync sends the leader's player as it is (with countIn: start playing after that count). */
function sendSync(countIn) {
  if (role !== 'leader' || !video.src || video.readyState < 1) return;
  const frame = { type: 'sync', playing: !video.paused && !video.ended, positionMs: positionMs(), rate: leaderRate };
  if (countIn && countIn.beats) { frame.playing = true; frame.countIn = countIn; }
  if (!control(frame)) return;
  renderPractice();
}

/** setRate changes the leader's speed; everyone follows at it. */
function setRate(r) {
  leaderRate = Math.round(Math.min(2, Math.max(0.25, r)) * 20) / 20;
  video.defaultPlaybackRate = leaderRate;
  video.playbackRate = leaderRate;
  sendSync();
  renderPractice();
}

/** adopt puts the leader's player where the room is (after a reload of the page). */
function adopt() {
  if (adopted || !room.playback || !video.src || video.readyState < 1) return;
  adopted = true;
  const p = room.playback;
  leaderRate = p.rate || 1;
  video.defaultPlaybackRate = leaderRate;
  video.playbackRate = leaderRate;
  const target = timeline(p, room.loop, serverNow()).pos;
  if (target > 0) video.currentTime = Math.min(target, video.duration * 1000 || target) / 1000;
  if (p.playing) video.play().catch(() => setStatus($('follow'), 'Press Play to continue leading.', 'warn'));
  renderPractice();
}

/** startCountIn pauses, then counts the beats in on everyone's page; the video starts on the next beat. */
function startCountIn() {
  const beats = formNumber('count-beats');
  const bpm = formNumber('count-bpm');
  if (!Number.isInteger(beats) || beats < 1 || beats > 16) { $('practice-error').textContent = 'A count-in is 1 to 16 beats.'; $('count-beats').focus(); return; }
  if (!Number.isInteger(bpm) || bpm < 40 || bpm > 240) { $('practice-error').textContent = 'The tempo is 40 to 240 beats a minute.'; $('count-bpm').focus(); return; }
  $('practice-error').textContent = '';
  const go = () => sendSync({ beats, bpm });
  if (!video.paused) { video.addEventListener('pause', go, { once: true }); video.pause(); } else go();
}

/** fillLoopChoices offers the current position and every mark as the loop's ends. */
function fillLoopChoices() {
  for (const id of ['loop-start', 'loop-end']) {
    const sel = $(id);
    const was = sel.value;
    sel.replaceChildren(el('option', { value: 'now', text: 'The current position' }),
      ...sortedMarks().map((m) => el('option', { value: String(m.positionMs), text: `Mark ${markLabel(m)}` })));
    if ([...sel.options].some((o) => o.value === was)) sel.value = was;
  }
}

/** setLoop loops the section the leader picked, after checking it as the server will. */
function setLoop() {
  const pick = (id) => ($(id).value === 'now' ? positionMs() : Number($(id).value));
  const startMs = pick('loop-start');
  const endMs = pick('loop-end');
  const fail = (msg) => { $('practice-error').textContent = msg; };
  if (endMs <= startMs) { fail(`A loop must end after it starts: it would start at ${fine(startMs)} and end at ${fine(endMs)}. Pick a later end.`); return; }
  const dur = room.video?.durationMs ?? Infinity;
  if (endMs > dur) { fail(`A loop must lie within the video: it would end at ${fine(endMs)} but the video is ${fine(dur)} long.`); return; }
  $('practice-error').textContent = '';
  if (!control({ type: 'loop', startMs, endMs })) return;
  renderPractice();
  const pos = positionMs();
  if (pos < startMs || pos >= endMs) seekTo(startMs); // loop that section now
}

let lastLeaderPos = null; // the leader's position at the last tick while playing

/** leaderTick wraps the leader's player at the loop's end and starts a count-in's playback. */
function leaderTick(tl) {
  if (countFor !== room.playback) {
    // Another playback (the room's stamp of the count-in, a refusal, a later sync): the start
    // scheduled for the old one goes.
    clearTimeout(countTimer);
    countTimer = 0;
    countFor = null;
  }
  if (tl.startsIn !== undefined && !countTimer) {
    const p = room.playback;
    countFor = p;
    countTimer = setTimeout(() => {
      countTimer = 0;
      if (room.playback !== p) return;
      video.play().catch((err) => showError(`The player refused to play: ${err.message}`));
    }, tl.startsIn);
  }
  if (!room.loop || video.paused || video.seeking) { lastLeaderPos = null; return; }
  const pos = positionMs();
  const { startMs, endMs } = room.loop;
  if (lastLeaderPos !== null && lastLeaderPos < endMs && pos >= endMs) {
    seekTo(startMs + ((pos - endMs) % (endMs - startMs)));
    lastLeaderPos = null;
    return;
  }
  lastLeaderPos = pos;
}

function seekTo(ms) {
  video.currentTime = Math.max(0, Math.min(ms, (video.duration || 0) * 1000)) / 1000;
}

function updateClock() {
  $('clock').textContent = `${clock(video.currentTime * 1000)} / ${clock((video.duration || 0) * 1000)}`;
  if (document.activeElement !== $('seek')) $('seek').value = String(video.currentTime);
}

if (role === 'leader') {
  $('leader-controls').hidden = false;
  setLeaderEnabled(false);
  for (const ev of ['play', 'pause', 'seeked', 'ended']) video.addEventListener(ev, sendSync);
  video.addEventListener('timeupdate', updateClock);
  setInterval(() => { if (!video.paused) sendSync(); }, HEARTBEAT_MS);
  $('play').addEventListener('click', () => video.play().catch((err) => showError(`The player refused to play: ${err.message}`)));
  $('pause').addEventListener('click', () => video.pause());
  $('back').addEventListener('click', () => seekTo(positionMs() - 5000));
  $('fwd').addEventListener('click', () => seekTo(positionMs() + 5000));
  $('seek').addEventListener('input', () => { $('clock').textContent = `${clock($('seek').value * 1000)} / ${clock((video.duration || 0) * 1000)}`; });
  $('seek').addEventListener('change', () => seekTo($('seek').value * 1000));
  $('rate').addEventListener('input', () => setRate(Number($('rate').value)));
  for (const b of document.querySelectorAll('#speed-presets button')) b.addEventListener('click', () => setRate(Number(b.dataset.rate)));
  $('loop-form').addEventListener('submit', (e) => { e.preventDefault(); setLoop(); });
  $('loop-clear').addEventListener('click', () => {
    if (control({ type: 'loop', startMs: 0, endMs: 0 })) renderPractice();
  });
  $('count-form').addEventListener('submit', (e) => { e.preventDefault(); startCountIn(); });
  video.addEventListener('seeked', () => { lastLeaderPos = null; });
  video.addEventListener('seeked', () => renderStage());
  video.addEventListener('pause', () => renderStage());
  $('mark-form').addEventListener('submit', (e) => {
    e.preventDefault();
    if (room.marks.length >= MAX_MARKS) { showError(`A room holds at most ${MAX_MARKS} marks; this one was not added.`); return; }
    const mark = { type: 'mark', positionMs: positionMs(), label: $('mark-label').value.trim() };
    if (control(mark)) {
      $('mark-label').value = '';
      renderMarks();
      renderFormation();
    }
  });
  $('reload').addEventListener('click', () => control({ type: 'reload' }));
  $('formation-editor').hidden = false;
  formationForm();
  switchForm();
  $('end').addEventListener('click', async () => {
    if (!confirm('End this room for everyone? Viewers will be told it ended.')) return;
    try {
      await api('DELETE', `/lobby/rooms/${encodeURIComponent(code)}`, undefined, { Authorization: `Bearer ${token}` });
      showEnded(endedSentence('ended'));
    } catch (err) {
      showError(err.message);
    }
  });
}

// ---- viewer ----------------------------------------------------------------------------

let drift = 0; // ms, player minus target; read by the follow status and the tests

function playNow() {
  video.play().then(() => { $('start').hidden = true; }).catch((err) => {
    if (err.name === 'NotAllowedError') {
      $('start').hidden = false;
      setStatus($('follow'), 'Your browser wants a tap before playing: press Start following.', 'warn');
    }
  });
}

/**
 * follow steers the viewer's player toward the room's timeline: the leader's position, at the
 * leader's rate, wrapped at the loop's end, held during a count-in.
 */
function follow() {
  if (role !== 'viewer' || ended || !video.src || video.readyState < 1) return;
  const p = room.playback;
  if (!p) { setStatus($('follow'), 'Waiting for the leader to start.', 'warn'); return; }
  const rate = p.rate || 1;
  const durMs = (video.duration || Infinity) * 1000;
  const tl = timeline(p, room.loop, serverNow());
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
    setStatus($('follow'), text, 'ok');
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
  setStatus($('follow'), `Following the leader (${drift >= 0 ? '+' : ''}${Math.round(drift)} ms).`, 'ok');
}

let startTimer = 0; // a count-in's start, scheduled to the millisecond
let startFor = null; // the playback it was scheduled for

/** viewerTick starts the player on the beat after a count-in, not at the next follow. */
function viewerTick(tl) {
  if (tl.startsIn === undefined || startFor === room.playback || !video.src || video.readyState < 1) return;
  startFor = room.playback;
  clearTimeout(startTimer);
  const p = room.playback;
  startTimer = setTimeout(() => {
    if (room.playback !== p) return;
    video.playbackRate = p.rate || 1;
    playNow();
  }, tl.startsIn);
}

if (role === 'viewer') {
  setInterval(follow, FOLLOW_MS);
  $('start').addEventListener('click', () => { follow(); playNow(); });
}

// ---- every page: speed and loop status, the count, mirroring, the moving stage ---------------

/** renderPractice shows the room's speed and loop (and sets the leader's controls to them). */
function renderPractice() {
  const p = room.playback;
  const rate = role === 'leader' ? leaderRate : p?.rate || 1;
  const parts = [`Speed ${rate}×`];
  if (room.loop) parts.push(`looping ${fine(room.loop.startMs)}–${fine(room.loop.endMs)}`);
  $('practice-status').textContent = parts.join(' · ');
  $('practice-status').dataset.rate = String(rate);
  $('practice-status').dataset.loop = room.loop ? `${room.loop.startMs}-${room.loop.endMs}` : '';
  if (role === 'leader') {
    if (document.activeElement !== $('rate')) $('rate').value = String(rate);
    $('rate-value').textContent = `${rate.toFixed(2)}×`;
    for (const b of document.querySelectorAll('#speed-presets button')) b.setAttribute('aria-pressed', String(Number(b.dataset.rate) === rate));
    $('loop-clear').disabled = !room.loop || !video.src;
  }
}

/** renderCount shows the count-in's beat on the room's clock: every page the same word. */
function renderCount(tl) {
  const box = $('count');
  if (tl.beat === undefined) {
    if (!box.hidden) { box.hidden = true; box.dataset.beat = ''; }
    return;
  }
  const key = tl.beat ? String(tl.beat) : '';
  if (!box.hidden && box.dataset.beat === key && (tl.beat || box.dataset.word === 'ready')) return;
  const word = tl.beat ? countWord(tl.beat, tl.beats) : 'ready';
  box.hidden = false;
  box.dataset.word = word;
  box.dataset.beat = key;
  const words = Array.from({ length: tl.beats }, (_, i) => countWord(i + 1, tl.beats));
  $('count-now').textContent = tl.beat ? word : '…';
  $('count-all').replaceChildren(...words.map((w, i) => el('span', { class: i + 1 === tl.beat ? 'now' : '', text: w })));
}

let beatTimers = [];
let beatsFor = null; // the playback whose beats are scheduled
let countDoneFor = null; // the playback whose count has ended (a clock sample later must not show it again)

/**
 * scheduleBeats shows each beat of a count-in at its millisecond on the room's clock (the
 * tick alone would show it up to a tick late, differently on every page).
 */
function scheduleBeats() {
  const p = room.playback;
  if (p === beatsFor) return;
  beatsFor = p;
  for (const id of beatTimers) clearTimeout(id);
  beatTimers = [];
  if (!p || !p.playing || !p.countIn) return;
  const beatMs = 60000 / p.countIn.bpm;
  for (let k = 1; k <= p.countIn.beats + 1; k++) {
    const due = countStart(p) + (k - 1) * beatMs - serverNow();
    if (due < 0) continue;
    beatTimers.push(setTimeout(() => {
      if (room.playback !== p) return;
      const tl = timeline(p, room.loop, serverNow());
      if (k > p.countIn.beats) countDoneFor = p;
      renderCount(k > p.countIn.beats ? {} : { beat: Math.max(k, tl.beat || 0), beats: p.countIn.beats });
    }, due));
  }
}

function tick() {
  if (ended) return;
  const tl = timeline(room.playback, room.loop, serverNow());
  scheduleBeats();
  renderCount(room.playback === countDoneFor ? {} : tl);
  if (role === 'leader') leaderTick(tl);
  else viewerTick(tl);
  renderStage();
}
setInterval(tick, TICK_MS);

let mirrored = false;
try { mirrored = localStorage.getItem(MIRROR_KEY) === '1'; } catch { /* storage off: not remembered */ }

/** applyMirror flips this page's picture and stage (only here: it is each person's choice). */
function applyMirror() {
  video.classList.toggle('mirrored', mirrored);
  stage.setMirror(mirrored);
  $('mirror').setAttribute('aria-pressed', String(mirrored));
  $('mirror').textContent = mirrored ? 'Mirrored: tap for the camera view' : 'Mirror the picture';
  $('mirror-note').textContent = mirrored ? 'Mirrored on this device: left and right are swapped, as in a mirror. The audience is still at the bottom of the stage.' : '';
}
$('mirror').addEventListener('click', () => {
  mirrored = !mirrored;
  try { localStorage.setItem(MIRROR_KEY, mirrored ? '1' : '0'); } catch { /* not remembered */ }
  applyMirror();
  renderStage(true);
});
applyMirror();

$('mute').addEventListener('click', () => {
  video.muted = !video.muted;
  $('mute').textContent = video.muted ? 'Unmute' : 'Mute';
  $('mute').setAttribute('aria-pressed', String(video.muted));
});

// ---- chat ------------------------------------------------------------------------------

function startChat(name) {
  $('chat-name').hidden = true;
  window.vigilChat = new ChatPanel($('chat'), { room: `room-${code}`, userId: clientId(), username: name });
}

$('chat-name').addEventListener('submit', (e) => {
  e.preventDefault();
  const name = $('chat-name-input').value.trim();
  if (!name || name.length > 64) {
    $('chat-name-error').textContent = 'Give your name (1–64 characters) to chat.';
    return;
  }
  saveName(name);
  startChat(name);
});

// ---- start -----------------------------------------------------------------------------

/** For the browser tests and the curious: the room as this page sees it. */
window.vigilRoom = {
  room, video, role, timeline, get drift() { return drift; }, get offset() { return offset; }, serverNow, get mirrored() { return mirrored; },
};

async function start() {
  if (!/^[a-z0-9](?:[a-z0-9-]{1,38}[a-z0-9])$/.test(code)) {
    showEnded('This link has no valid room code. Pick a room from the list.');
    return;
  }
  renderInfo();
  renderFormation();
  renderPractice();
  try {
    const r = await api('GET', `/lobby/rooms/${encodeURIComponent(code)}`);
    const info = r.room || r;
    $('room-name').textContent = info.name;
    document.title = `${info.name} · Vigil`;
    room.video = info.video;
    room.viewers = info.viewers;
    room.leaderPresent = info.leaderPresent;
    renderInfo(); renderOccupancy();
  } catch (err) {
    if (err.status === 404) { showEnded(endedSentence('')); return; }
    showError(err.message);
  }
  connect();
  if (savedName()) startChat(savedName());
  else $('chat-name').hidden = false;
}

start();
