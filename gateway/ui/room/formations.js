// Formations in the room: the stage everyone sees (the formation of the mark playback last
// passed, each dancer moving in a straight line toward the next mark's formation), and the
// leader's editor (typed, dragged, or with the keyboard), which sets the formation of the
// mark at or before the playhead, or the default one before any mark. The rules and the
// drawing are ../formation.js.
//
// It owns #formation-section.
import { $ } from '../common.js';
import {
  DEFAULT_GRID, Stage, axisError, emptyFormation, firstFree, formationAt, formationError, gridError, nameError, place,
  remove, resize,
} from '../formation.js';
import { onTick, serverNow } from './clock.js';
import { role } from './context.js';
import { video } from './player.js';
import { control } from './socket.js';
import * as state from './state.js';
import { markLabel, sortedMarks, timeline } from './timeline.js';

/** validFormation is f when it is a stage of dancers the page can draw, else null. */
export const validFormation = (f) => (f !== null && f !== undefined && !formationError(f) ? f : null);

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

/** shownFormation is the room's default formation when it is one the stage can draw, else null. */
function shownFormation() { return validFormation(state.get('formation')); }

const marks = () => sortedMarks(state.get('marks'));

/** playheadMs is where this page's video is (the room's timeline before a file is picked). */
function playheadMs() {
  if (video.src && video.readyState >= 1) return video.currentTime * 1000;
  return timeline(state.get('playback'), state.get('loop'), serverNow()).pos;
}

/** heldAt is the formation in force at ms, without moving: the last mark's at or before it, else the default. */
function heldAt(ms) {
  let f = shownFormation();
  for (const m of marks()) {
    if (m.positionMs > ms) break;
    if (validFormation(m.formation)) f = m.formation;
  }
  return f;
}

/** editMark is the mark whose formation the leader edits: the last at or before the playhead (null: the default). */
function editMark() {
  const pos = playheadMs() + 50; // a seek to a mark may land a frame short of it
  let mark = null;
  for (const m of marks()) if (m.positionMs <= pos) mark = m;
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
  return formationAt(state.get('marks'), shownFormation(), playheadMs());
}

/** currentGrid is the stage size the leader edits on. */
function currentGrid() { return editedFormation()?.grid || stage.formation?.grid || DEFAULT_GRID; }

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
  const f = state.get('formation');
  const has = f !== null && f !== undefined;
  const ok = shownFormation();
  // A formation in another shape (sent by a script) is shown as it is, not lost.
  $('formation-raw').hidden = !has || !!ok;
  $('formation-raw').textContent = has && !ok ? JSON.stringify(f, null, 2) : '';
  const drawn = renderStage(true);
  const marked = state.get('marks').filter((m) => validFormation(m.formation)).length;
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
  $('formation-status').textContent = `Sent: ${what}. ${$('formation-status').textContent}`;
  return true;
}

/** formNumber reads a number field: null when empty, NaN when not a whole number. */
function formNumber(id) {
  const raw = $(id).value.trim();
  if (raw === '') return null;
  return /^\d+$/.test(raw) ? Number(raw) : NaN;
}

function editorForms() {
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

state.subscribe(['marks', 'formation'], renderFormation);
state.subscribe(['mirrored'], () => { stage.setMirror(!!state.get('mirrored')); renderStage(true); });
stage.setMirror(!!state.get('mirrored'));
onTick(() => renderStage());
if (role === 'leader') {
  $('formation-editor').hidden = false;
  editorForms();
  video.addEventListener('seeked', () => renderStage());
  video.addEventListener('pause', () => renderStage());
}
state.subscribe(['ended'], () => { $('formation-editor').hidden = true; });
renderFormation();
