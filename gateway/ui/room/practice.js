// The practice line everyone sees under the video ("Speed 0.5× · looping 0:02.0–0:05.0"), and
// the line where the leader's practice tools say what they refused.
//
// It owns #practice-status and #practice-error. The tools put their sentences in the state's
// practiceError.
import { $ } from '../common.js';
import { role } from './context.js';
import * as state from './state.js';
import { fine } from './timeline.js';

/** shownRate is the room's speed as this page plays it (the leader's own pick on its page). */
export const shownRate = () => (role === 'leader' ? state.get('leaderRate') || 1 : state.get('playback')?.rate || 1);

function render() {
  const rate = shownRate();
  const loop = state.get('loop');
  const parts = [`Speed ${rate}×`];
  if (loop) parts.push(`looping ${fine(loop.startMs)}–${fine(loop.endMs)}`);
  const line = $('practice-status');
  line.textContent = parts.join(' · ');
  line.dataset.rate = String(rate);
  line.dataset.loop = loop ? `${loop.startMs}-${loop.endMs}` : '';
}

state.subscribe(['playback', 'loop', 'leaderRate'], render);
state.subscribe(['practiceError'], () => { $('practice-error').textContent = state.get('practiceError') || ''; });
render();
