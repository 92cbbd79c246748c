// The room's timeline: where the video is at a moment of the room's clock, given the room's
// playback and loop. Pure functions, the same on every page (and the same rules as the room
// service's act.lua), so every page computes the same position from the same frames.
import { clock } from '../common.js';

/** COUNT_LEAD_MS: a count's first beat comes this long after its stamp, so every page has the frame by then. */
export const COUNT_LEAD_MS = 500;

/** countMs is how long a count-in lasts (the server's rounding). */
export const countMs = (c) => (c && c.beats && c.bpm ? Math.floor((c.beats * 60000 + Math.floor(c.bpm / 2)) / c.bpm) : 0);

/** countStart is when a count-in's first beat sounds on the room's clock. */
export const countStart = (p) => p.at + COUNT_LEAD_MS;

/**
 * timeline is where the room's video is at server time t: {pos} (ms), with {beat, beats,
 * startsIn} while a count-in runs (beat 0 before its first beat, then 1..beats). Playing, the
 * video starts at at (or on the beat after the count-in) and runs at the rate; passing the
 * loop's end from before it, it goes on from the loop's start.
 */
export function timeline(p, loop, t) {
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
export const countWord = (k, n) => String((((8 - n + k - 1) % 8) + 8) % 8 + 1);

/** fine renders a position to the tenth of a second (m:ss.t), as loops are set. */
export function fine(ms) { return `${clock(ms)}.${Math.floor((Math.max(0, ms) % 1000) / 100)}`; }

/** markLabel is how a mark is named on the page: its position and its label. */
export const markLabel = (m) => `${clock(m.positionMs)}${m.label ? ' ' + m.label : ''}`;

/** sortedMarks is the marks in the order of their positions. */
export const sortedMarks = (marks) => [...marks].sort((a, b) => a.positionMs - b.positionMs);
