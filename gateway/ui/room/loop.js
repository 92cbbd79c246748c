// The A-B loop, a practice tool: the leader loops a section between the current position or
// any two marks; the loop is room state, and every page wraps at its end on the same clock
// (timeline.js). The leader's own player wraps here, on the tick.
//
// It owns #loop-form (its two choices, "Loop this section", "Stop looping").
import { $, el } from '../common.js';
import { onTick } from './clock.js';
import { role } from './context.js';
import { hasFile, positionMs, seekTo, video } from './player.js';
import { control } from './socket.js';
import * as state from './state.js';
import { fine, markLabel, sortedMarks } from './timeline.js';

/** fillChoices offers the current position and every mark as the loop's ends. */
function fillChoices() {
  for (const id of ['loop-start', 'loop-end']) {
    const sel = $(id);
    const was = sel.value;
    sel.replaceChildren(el('option', { value: 'now', text: 'The current position' }),
      ...sortedMarks(state.get('marks')).map((m) => el('option', { value: String(m.positionMs), text: `Mark ${markLabel(m)}` })));
    if ([...sel.options].some((o) => o.value === was)) sel.value = was;
  }
}

/** setLoop loops from startMs to endMs, after checking it as the server will. */
export function setLoop(startMs, endMs) {
  const fail = (msg) => state.set({ practiceError: msg });
  if (endMs <= startMs) { fail(`A loop must end after it starts: it would start at ${fine(startMs)} and end at ${fine(endMs)}. Pick a later end.`); return false; }
  const dur = state.get('video')?.durationMs ?? Infinity;
  if (endMs > dur) { fail(`A loop must lie within the video: it would end at ${fine(endMs)} but the video is ${fine(dur)} long.`); return false; }
  state.set({ practiceError: '' });
  if (!control({ type: 'loop', startMs, endMs })) return false;
  const pos = positionMs();
  if (pos < startMs || pos >= endMs) seekTo(startMs); // loop that section now
  return true;
}

/** clearLoop stops looping. */
export function clearLoop() { control({ type: 'loop', startMs: 0, endMs: 0 }); }

let lastPos = null; // the leader's position at the last tick while playing

/** wrap wraps the leader's player at the loop's end. */
function wrap() {
  const loop = state.get('loop');
  if (!loop || video.paused || video.seeking) { lastPos = null; return; }
  const pos = positionMs();
  const { startMs, endMs } = loop;
  if (lastPos !== null && lastPos < endMs && pos >= endMs) {
    seekTo(startMs + ((pos - endMs) % (endMs - startMs)));
    lastPos = null;
    return;
  }
  lastPos = pos;
}

if (role === 'leader') {
  const pick = (id) => ($(id).value === 'now' ? positionMs() : Number($(id).value));
  $('loop-form').addEventListener('submit', (e) => { e.preventDefault(); setLoop(pick('loop-start'), pick('loop-end')); });
  $('loop-clear').addEventListener('click', clearLoop);
  const enable = () => {
    $('loop-set').disabled = !state.get('loaded');
    $('loop-clear').disabled = !state.get('loop') || !hasFile() || !state.get('loaded');
  };
  state.subscribe(['loop', 'loaded'], enable);
  state.subscribe(['marks'], fillChoices);
  video.addEventListener('seeked', () => { lastPos = null; });
  onTick(wrap);
  enable();
}
