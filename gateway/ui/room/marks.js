// Marks: the room's list of marked moments, and the leader's "Mark this moment". A leader's
// mark is a button that takes the player there.
//
// It owns #marks, #no-marks and #mark-form.
import { $, el } from '../common.js';
import { role } from './context.js';
import { positionMs, seekTo } from './player.js';
import { control } from './socket.js';
import * as state from './state.js';
import { markLabel } from './timeline.js';
import { validFormation } from './formations.js';

const MAX_MARKS = 200; // the room's limit (docs/API.md)

function render() {
  const marks = state.get('marks');
  $('marks').replaceChildren(...marks.map((m) => {
    const label = `${markLabel(m)}${validFormation(m.formation) ? ' · formation' : ''}`;
    if (role === 'leader') {
      return el('li', {}, el('button', { type: 'button', text: label, 'aria-label': `Go to mark ${label}`, onclick: () => seekTo(m.positionMs) }));
    }
    return el('li', { text: label });
  }));
  $('no-marks').hidden = marks.length > 0;
}

state.subscribe(['marks'], render);
render();

if (role === 'leader') {
  $('mark-form').addEventListener('submit', (e) => {
    e.preventDefault();
    if (state.get('marks').length >= MAX_MARKS) { state.set({ error: `A room holds at most ${MAX_MARKS} marks; this one was not added.` }); return; }
    if (control({ type: 'mark', positionMs: positionMs(), label: $('mark-label').value.trim() })) $('mark-label').value = '';
  });
  const enable = () => { for (const id of ['mark', 'mark-label']) $(id).disabled = !state.get('loaded'); };
  state.subscribe(['loaded'], enable);
  enable();
}
