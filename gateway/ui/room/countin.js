// The count-in, a practice tool: the leader sends a sync with countIn ({beats, bpm}); every
// page counts the same beats on the room's clock, over the video ("5, 6, 7, 8"), and every
// player starts on the beat after, to the millisecond.
//
// It owns #count-form (the leader's) and #count (the beats over the video, on every page).
import { $, el } from '../common.js';
import { onTick, serverNow } from './clock.js';
import { role } from './context.js';
import { playNow } from './follow.js';
import { play, sendSync } from './leader.js';
import { video } from './player.js';
import * as state from './state.js';
import { countStart, countWord, timeline } from './timeline.js';

/** formNumber reads a number field: null when empty, NaN when not a whole number. */
function formNumber(id) {
  const raw = $(id).value.trim();
  if (raw === '') return null;
  return /^\d+$/.test(raw) ? Number(raw) : NaN;
}

/** startCountIn pauses, then counts the beats in on everyone's page; the video starts on the next beat. */
export function startCountIn() {
  if (role !== 'leader' || !state.get('loaded')) return;
  const beats = formNumber('count-beats');
  const bpm = formNumber('count-bpm');
  if (!Number.isInteger(beats) || beats < 1 || beats > 16) { state.set({ practiceError: 'A count-in is 1 to 16 beats.' }); $('count-beats').focus(); return; }
  if (!Number.isInteger(bpm) || bpm < 40 || bpm > 240) { state.set({ practiceError: 'The tempo is 40 to 240 beats a minute.' }); $('count-bpm').focus(); return; }
  state.set({ practiceError: '' });
  const go = () => sendSync({ beats, bpm });
  if (!video.paused) { video.addEventListener('pause', go, { once: true }); video.pause(); } else go();
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
  const p = state.get('playback');
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
      if (state.get('playback') !== p) return;
      const tl = timeline(p, state.get('loop'), serverNow());
      if (k > p.countIn.beats) countDoneFor = p;
      renderCount(k > p.countIn.beats ? {} : { beat: Math.max(k, tl.beat || 0), beats: p.countIn.beats });
    }, due));
  }
}

let startTimer = 0; // the count-in's start, scheduled to the millisecond
let startFor = null; // the playback it was scheduled for

/** scheduleStart starts the player on the beat after a count-in, not at the next tick. */
function scheduleStart(tl) {
  const p = state.get('playback');
  if (startFor !== p) {
    // Another playback (the room's stamp of the count-in, a refusal, a later sync): the start
    // scheduled for the old one goes.
    clearTimeout(startTimer);
    startTimer = 0;
    startFor = null;
  }
  if (tl.startsIn === undefined || startTimer || !video.src || video.readyState < 1) return;
  startFor = p;
  startTimer = setTimeout(() => {
    startTimer = 0;
    if (state.get('playback') !== p) return;
    state.emit('countInEnded', p);
    if (role === 'leader') { play(); return; }
    video.playbackRate = p.rate || 1;
    playNow();
  }, tl.startsIn);
}

onTick((tl) => {
  scheduleBeats();
  renderCount(state.get('playback') === countDoneFor ? {} : tl);
  scheduleStart(tl);
});
// A count stamped by the room (the ack's at) starts its beats at once, not at the next tick.
state.subscribe(['playback'], scheduleBeats);

if (role === 'leader') {
  $('count-form').addEventListener('submit', (e) => { e.preventDefault(); startCountIn(); });
  const enable = () => { $('count-play').disabled = !state.get('loaded'); };
  state.subscribe(['loaded'], enable);
  enable();
}
