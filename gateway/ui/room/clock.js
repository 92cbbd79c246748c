// The room's clock, as this page estimates it, and the one tick every page runs on.
//
// offset = serverTime - localTime. A frame stamped at `at` (the room's clock) and received now
// gives at - now = offset - latency, so the largest recent sample is the best estimate. Until
// the first stamped frame arrives the offset is 0 (clocks kept by NTP are close).
import * as state from './state.js';
import { timeline } from './timeline.js';

const TICK_MS = 20; // every page: count-in, loop end, the stage between marks
const SAMPLES = 30;

const samples = [];
let offset = 0;

/** sampleOffset takes one stamp of the room's clock (a sync's or an ack's at). */
export function sampleOffset(at) {
  if (typeof at !== 'number') return;
  samples.push(at - Date.now());
  if (samples.length > SAMPLES) samples.shift();
  offset = Math.max(...samples);
}

/** serverNow is the room's clock now, as this page estimates it. */
export const serverNow = () => Date.now() + offset;

/** currentOffset is the estimate (ms). */
export const currentOffset = () => offset;

const tickers = [];

/**
 * onTick calls fn(tl) every tick (20 ms), with the room's timeline now: the modules that must
 * act on the millisecond (a count-in's start, a loop's end, the moving stage) share one timer.
 */
export function onTick(fn) { tickers.push(fn); }

setInterval(() => {
  if (state.get('ended')) return;
  const tl = timeline(state.get('playback'), state.get('loop'), serverNow());
  for (const fn of tickers) fn(tl);
}, TICK_MS);
