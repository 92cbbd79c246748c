// Speed, a practice tool: the leader picks 0.25× to 2× (a slider, or 0.5×, 0.75× and 1×);
// the leader's player plays at it, every sync carries it, and the viewers follow at it (see
// follow.js).
//
// It owns the speed row (#rate, #rate-value, #speed-presets). State: leaderRate.
import { $ } from '../common.js';
import { role } from './context.js';
import { sendSync } from './leader.js';
import { video } from './player.js';
import * as state from './state.js';

/** PRESETS are the speeds the keyboard's 1-4 pick. */
export const PRESETS = [0.5, 0.75, 1, 1.25];

/** setRate changes the leader's speed; everyone follows at it. */
export function setRate(r) {
  if (role !== 'leader' || !state.get('loaded')) return;
  state.set({ leaderRate: Math.round(Math.min(2, Math.max(0.25, r)) * 20) / 20 });
  sendSync();
}

function render() {
  const rate = state.get('leaderRate') || 1;
  if (document.activeElement !== $('rate')) $('rate').value = String(rate);
  $('rate-value').textContent = `${rate.toFixed(2)}×`;
  for (const b of document.querySelectorAll('#speed-presets button')) b.setAttribute('aria-pressed', String(Number(b.dataset.rate) === rate));
}

function enable(on) {
  $('rate').disabled = !on;
  for (const b of document.querySelectorAll('#speed-presets button')) b.disabled = !on;
}

if (role === 'leader') {
  enable(false);
  $('rate').addEventListener('input', () => setRate(Number($('rate').value)));
  for (const b of document.querySelectorAll('#speed-presets button')) b.addEventListener('click', () => setRate(Number(b.dataset.rate)));
  state.subscribe(['leaderRate'], () => {
    // The leader's player plays at the leader's speed (and keeps it across a pause).
    const rate = state.get('leaderRate') || 1;
    video.defaultPlaybackRate = rate;
    video.playbackRate = rate;
    render();
  });
  // A refusal rolls the room back: the speed is the room's again.
  state.on('rolledBack', () => state.set({ leaderRate: state.get('playback')?.rate || 1 }));
  state.subscribe(['loaded'], () => enable(!!state.get('loaded')));
  render();
}
