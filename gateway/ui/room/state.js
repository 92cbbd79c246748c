// The room page's shared state: what the room is (its playback, loop, marks, video, formation,
// people), what this page is (its role, whether the room ended, the leader's speed, mirroring)
// and the happenings the modules tell each other about. Each module reads the values with get,
// changes them with set, and subscribes to the keys it draws; none keeps a copy of another's.
// Values are replaced, never changed in place, so a subscriber can compare with ===.

const values = new Map();
const listeners = new Map(); // key -> Set of functions
const handlers = new Map(); // event name -> Set of functions

/** get is the value of key (undefined until set). */
export function get(key) { return values.get(key); }

/**
 * set sets one or more keys ({key: value}) and then calls each subscriber of a changed key
 * once, with the whole change, so a module drawing several keys draws once per frame.
 */
export function set(changes) {
  const due = new Set();
  for (const [k, v] of Object.entries(changes)) {
    if (values.get(k) === v && values.has(k)) continue;
    values.set(k, v);
    for (const fn of listeners.get(k) || []) due.add(fn);
  }
  for (const fn of due) fn(changes);
}

/** subscribe calls fn(changes) after set changes any of keys; it returns the unsubscribe. */
export function subscribe(keys, fn) {
  for (const k of keys) {
    if (!listeners.has(k)) listeners.set(k, new Set());
    listeners.get(k).add(fn);
  }
  return () => { for (const k of keys) listeners.get(k).delete(fn); };
}

/** on calls fn(detail) each time the event is emitted (a happening, not a value: "the leader asked for a reload"). */
export function on(event, fn) {
  if (!handlers.has(event)) handlers.set(event, new Set());
  handlers.get(event).add(fn);
}

/** emit tells every handler of event. */
export function emit(event, detail) {
  for (const fn of handlers.get(event) || []) fn(detail);
}

/** ROOM_KEYS are the room's own state, as the room service keeps it. */
export const ROOM_KEYS = ['playback', 'loop', 'marks', 'video', 'viewers', 'leaderPresent', 'formation', 'people'];

/** roomView is a live, read-only object of the room's keys (window.vigilRoom.room). */
export function roomView() {
  const view = {};
  for (const k of ROOM_KEYS) Object.defineProperty(view, k, { get: () => values.get(k), enumerable: true });
  return view;
}

set({
  playback: null, // {playing, positionMs, at, rate, countIn: {beats, bpm} | null}
  loop: null, // {startMs, endMs}
  marks: [], // [{positionMs, label, at, formation}]
  video: null, // {title, durationMs}
  viewers: null, // a number once the lobby or the room says
  leaderPresent: false,
  formation: null,
  people: [], // who is here: [{clientId, name, role, since}], in order of arrival
  ended: '', // the sentence saying why the room closed, once it has
  error: '', // the last sentence of a refusal or a failure, shown under the marks
  mirrored: false, // this person's choice, kept on their device
});
