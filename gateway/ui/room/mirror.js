// Mirroring, a practice tool: each person's own choice, kept on their device. The picture and
// the stage flip (player.js and formations.js draw it from the state's mirrored).
//
// It owns #mirror (the button) and #mirror-note.
import { $ } from '../common.js';
import * as state from './state.js';

const MIRROR_KEY = 'vigil.mirror';

/** toggleMirror flips this page's picture and stage, and remembers the choice. */
export function toggleMirror() {
  const on = !state.get('mirrored');
  try { localStorage.setItem(MIRROR_KEY, on ? '1' : '0'); } catch { /* storage off: not remembered */ }
  state.set({ mirrored: on });
}

function render() {
  const on = state.get('mirrored');
  $('mirror').setAttribute('aria-pressed', String(on));
  $('mirror').textContent = on ? 'Mirrored: tap to see it unmirrored' : 'Mirror the picture';
  $('mirror-note').textContent = on ? 'Mirrored on this device: left and right are swapped, as in a mirror. The audience is still at the bottom of the stage.' : '';
}

$('mirror').addEventListener('click', toggleMirror);
state.subscribe(['mirrored'], render);
try { state.set({ mirrored: localStorage.getItem(MIRROR_KEY) === '1' }); } catch { /* storage off: not remembered */ }
render();
