// Formations: named dancers placed on a stage grid. The room keeps any JSON value as its
// formation; the pages write and read this shape (docs/LOBBY.md, docs/UI.md):
//
//   {"grid": {"cols": 8, "rows": 6}, "dancers": [{"name": "Ann", "x": 2, "y": 1}]}
//
// x is the column counted from the left as the audience sees the stage, y the row counted from
// the front (1 is nearest the audience); both start at 1. Names are unique, one dancer a cell.
import { el } from './common.js';

export const MAX_GRID = 16; // columns and rows: 1 through 16 each
export const MAX_DANCERS = 32;
export const MAX_NAME = 32; // characters (code points)
export const DEFAULT_GRID = { cols: 8, rows: 6 };

const isInt = (v) => Number.isInteger(v);

/** nameError says what is wrong with a dancer's name, or ''. */
export function nameError(name) {
  const n = [...name].length;
  if (n === 0) return 'Give the dancer a name.';
  if (n > MAX_NAME) return `A dancer's name can be at most ${MAX_NAME} characters; this one has ${n}.`;
  if (/\p{Cc}/u.test(name)) return "A dancer's name cannot hold control characters such as tabs or line breaks.";
  return '';
}

/** axisError says what is wrong with a column or row number, or ''. */
export function axisError(what, v, max) {
  if (!isInt(v) || v < 1 || v > max) return `${what} must be a whole number from 1 to ${max}.`;
  return '';
}

/** gridError says what is wrong with a stage size, or ''. */
export function gridError(grid) {
  if (!grid || typeof grid !== 'object') return 'A formation needs a grid: {"cols", "rows"}.';
  return axisError('The number of columns', grid.cols, MAX_GRID) || axisError('The number of rows', grid.rows, MAX_GRID);
}

/** at finds the dancer standing on column x, row y. */
export function at(f, x, y) { return f.dancers.find((d) => d.x === x && d.y === y); }

/**
 * formationError says why f is not a formation the pages can show, or '' when it is one: a
 * grid of 1-16 columns and rows, at most 32 dancers with unique names of 1-32 characters,
 * each on its own cell inside the grid.
 */
export function formationError(f) {
  if (!f || typeof f !== 'object' || Array.isArray(f)) return 'A formation is a JSON object with a grid and dancers.';
  const g = gridError(f.grid);
  if (g) return g;
  if (!Array.isArray(f.dancers)) return 'A formation needs a list of dancers.';
  if (f.dancers.length > MAX_DANCERS) return `A formation holds at most ${MAX_DANCERS} dancers.`;
  const names = new Set();
  const cells = new Map();
  for (const d of f.dancers) {
    if (!d || typeof d.name !== 'string') return 'Every dancer needs a name.';
    const n = nameError(d.name);
    if (n) return n;
    if (names.has(d.name)) return `Two dancers are called ${d.name}; names must differ.`;
    names.add(d.name);
    const p = axisError(`${d.name}'s column`, d.x, f.grid.cols) || axisError(`${d.name}'s row`, d.y, f.grid.rows);
    if (p) return p;
    const key = `${d.x},${d.y}`;
    if (cells.has(key)) return `${cells.get(key)} and ${d.name} stand on the same spot (column ${d.x}, row ${d.y}).`;
    cells.set(key, d.name);
  }
  return '';
}

/** emptyFormation is a stage with nobody on it. */
export function emptyFormation(grid = DEFAULT_GRID) { return { grid: { ...grid }, dancers: [] }; }

/** firstFree is the first empty cell, front row first, left to right; null when full. */
export function firstFree(f) {
  for (let y = 1; y <= f.grid.rows; y++) {
    for (let x = 1; x <= f.grid.cols; x++) if (!at(f, x, y)) return { x, y };
  }
  return null;
}

/**
 * place puts the dancer called name on column x, row y (adding them when new) and returns
 * {formation} (a new object) or {error} (a sentence).
 */
export function place(f, name, x, y) {
  const err = nameError(name) || axisError('Column', x, f.grid.cols) || axisError('Row', y, f.grid.rows);
  if (err) return { error: err };
  const there = at(f, x, y);
  if (there && there.name !== name) return { error: `Column ${x}, row ${y} already has ${there.name}. Pick a free spot.` };
  const exists = f.dancers.some((d) => d.name === name);
  if (!exists && f.dancers.length >= MAX_DANCERS) return { error: `A formation holds at most ${MAX_DANCERS} dancers. Remove one first.` };
  const dancers = exists ? f.dancers.map((d) => (d.name === name ? { name, x, y } : { ...d })) : [...f.dancers.map((d) => ({ ...d })), { name, x, y }];
  return { formation: { grid: { ...f.grid }, dancers } };
}

/** remove takes the dancer called name off the stage: {formation} or {error}. */
export function remove(f, name) {
  if (!f.dancers.some((d) => d.name === name)) return { error: `Nobody called ${name} is on the stage.` };
  return { formation: { grid: { ...f.grid }, dancers: f.dancers.filter((d) => d.name !== name).map((d) => ({ ...d })) } };
}

/** resize changes the stage size, refusing when a dancer would fall off it. */
export function resize(f, cols, rows) {
  const err = axisError('The number of columns', cols, MAX_GRID) || axisError('The number of rows', rows, MAX_GRID);
  if (err) return { error: err };
  const off = f.dancers.find((d) => d.x > cols || d.y > rows);
  if (off) return { error: `${off.name} stands on column ${off.x}, row ${off.y}, outside a stage of ${cols} × ${rows}. Move them first.` };
  return { formation: { grid: { cols, rows }, dancers: f.dancers.map((d) => ({ ...d })) } };
}

const where = (d) => `column ${Math.round(d.x)}, row ${Math.round(d.y)}`;

/**
 * between is the formation a fraction t (0-1) of the way from a to b: each dancer on both
 * stages travels in a straight line from their spot in a to their spot in b (so everyone sees
 * who crosses whom); a dancer only in a stays on their spot until b is reached; a dancer only
 * in b appears then. The stage is a's until t reaches 1. Positions may be fractional.
 */
export function between(a, b, t) {
  if (t >= 1) return b;
  const to = new Map(b.dancers.map((d) => [d.name, d]));
  const clamp = (v, hi) => Math.min(hi, Math.max(1, v));
  return {
    grid: { ...a.grid },
    dancers: a.dancers.map((d) => {
      const e = to.get(d.name);
      if (!e || t <= 0) return { ...d };
      return { name: d.name, x: clamp(d.x + (e.x - d.x) * t, a.grid.cols), y: clamp(d.y + (e.y - d.y) * t, a.grid.rows) };
    }),
  };
}

/**
 * formationAt is what the stage shows at position ms of the video: the formation of the last
 * mark at or before ms that has one, moving towards the next mark's formation; the room's
 * default formation before the first such mark. marks are {positionMs, formation}.
 */
export function formationAt(marks, fallback, ms) {
  const withF = marks.filter((m) => m.formation && !formationError(m.formation)).sort((p, q) => p.positionMs - q.positionMs);
  let prev = null;
  let next = null;
  for (const m of withF) {
    if (m.positionMs <= ms) prev = m;
    else { next = m; break; }
  }
  if (!prev) return fallback;
  if (!next) return prev.formation;
  return between(prev.formation, next.formation, (ms - prev.positionMs) / (next.positionMs - prev.positionMs));
}

/**
 * Stage draws a formation: the grid, the audience side at the bottom, one tag per dancer, and
 * a text list (what a screen reader reads). Editable, each dancer is a button: drag it with a
 * mouse, a pen or a finger (pointer events), or focus it and press the arrow keys; Delete
 * takes it off. Changes go to onChange(formation) as a new object; nothing here sends.
 */
export class Stage {
  /**
   * @param {HTMLElement} root
   * @param {{editable: boolean, onChange?: (f: object, what: string) => void, onSelect?: (d: object) => void, onError?: (msg: string) => void}} opts
   */
  constructor(root, opts) {
    this.opts = opts;
    this.formation = null;
    this.tags = new Map(); // name → element, kept across renders so focus stays on a moved dancer
    this.drag = null;
    this.grid = el('div', { class: 'stage' + (opts.editable ? ' editable' : ''), id: 'stage', 'aria-hidden': opts.editable ? null : 'true' });
    this.mirrored = false;
    this.front = el('p', { class: 'stage-front', 'aria-hidden': 'true', text: 'Front · audience' });
    this.list = el('ul', { class: 'dancer-list', id: 'dancer-list', 'aria-label': 'Dancers and where they stand' });
    root.append(el('div', { class: 'stage-wrap' }, this.grid, this.front), this.list);
  }

  /**
   * setMirror flips the stage left to right (as the mirrored video is), and says so under it,
   * so nobody mistakes which side is which: the audience stays at the bottom.
   */
  setMirror(on) {
    this.mirrored = !!on;
    this.grid.classList.toggle('mirrored', this.mirrored);
    this.front.textContent = this.mirrored
      ? 'Front · audience — mirrored: left and right are swapped, as in a mirror facing the dancers'
      : 'Front · audience';
    if (this.formation) this.render(this.formation);
  }

  /** render shows f (a valid formation; while dancers move between marks, spots may be fractional). */
  render(f) {
    this.formation = f;
    const { cols, rows } = f.grid;
    this.grid.style.setProperty('--cols', String(cols));
    this.grid.style.setProperty('--rows', String(rows));
    this.grid.style.aspectRatio = `${cols} / ${rows}`;
    this.grid.setAttribute('aria-label', `Stage, ${cols} columns by ${rows} rows; row 1 is the front`);
    if (this.opts.editable) this.grid.setAttribute('role', 'group');
    const seen = new Set();
    for (const d of f.dancers) {
      seen.add(d.name);
      let tag = this.tags.get(d.name);
      if (!tag) {
        tag = this.opts.editable
          ? el('button', { type: 'button', class: 'dancer', text: d.name, 'data-name': d.name })
          : el('span', { class: 'dancer', text: d.name, 'data-name': d.name });
        if (this.opts.editable) this.wire(tag, d.name);
        this.tags.set(d.name, tag);
        this.grid.append(tag);
      }
      if (this.drag?.tag !== tag) this.put(tag, d.x, d.y);
      tag.dataset.x = String(Math.round(d.x));
      tag.dataset.y = String(Math.round(d.y));
      tag.dataset.fx = d.x.toFixed(3);
      tag.dataset.fy = d.y.toFixed(3);
      tag.title = `${d.name}: ${where(d)}`;
      if (this.opts.editable) tag.setAttribute('aria-label', `${d.name}, ${where(d)}. Arrow keys move, Delete removes.`);
    }
    for (const [name, tag] of this.tags) {
      if (!seen.has(name)) { tag.remove(); this.tags.delete(name); }
    }
    // The list changes only when someone reaches another spot, not on every frame of a move.
    const sorted = [...f.dancers].sort((a, b) => b.y - a.y || a.x - b.x);
    const key = sorted.map((d) => `${d.name}@${where(d)}`).join('|') + (f.dancers.length ? '' : 'empty');
    if (key === this.listKey) return;
    this.listKey = key;
    this.list.replaceChildren(...sorted.map((d) => el('li', { 'data-name': d.name }, el('span', { class: 'who', text: d.name }), ` ${where(d)}`)));
    if (!f.dancers.length) this.list.replaceChildren(el('li', { class: 'muted', text: 'Nobody is on the stage yet.' }));
  }

  /**
   * put places a tag on a cell: the front row (y = 1) is the bottom one; mirrored, column 1 is
   * on the right. A fractional spot (between two marks) is its cell plus a shift.
   */
  put(tag, x, y) {
    const { cols, rows } = this.formation.grid;
    const col = this.mirrored ? cols - x + 1 : x;
    const row = rows - y + 1;
    const c = Math.floor(col), r = Math.floor(row);
    tag.style.gridColumn = String(c);
    tag.style.gridRow = String(r);
    if (col === c && row === r) { tag.style.transform = ''; return; }
    const box = this.grid.getBoundingClientRect();
    tag.style.transform = `translate(${((col - c) * box.width) / cols}px, ${((row - r) * box.height) / rows}px)`;
  }

  /** cellAt is the cell under a point of the screen, clamped to the stage. */
  cellAt(clientX, clientY) {
    const r = this.grid.getBoundingClientRect();
    const { cols, rows } = this.formation.grid;
    const clamp = (v, hi) => Math.min(hi, Math.max(1, v));
    let x = clamp(Math.floor(((clientX - r.left) / r.width) * cols) + 1, cols);
    if (this.mirrored) x = cols - x + 1;
    const fromTop = clamp(Math.floor(((clientY - r.top) / r.height) * rows) + 1, rows);
    return { x, y: rows - fromTop + 1 };
  }

  change(result, what) {
    if (result.error) {
      this.opts.onError?.(result.error);
      this.render(this.formation); // a refused drag snaps back
      return;
    }
    this.opts.onChange?.(result.formation, what);
  }

  wire(tag, name) {
    const me = () => this.formation.dancers.find((d) => d.name === name);
    tag.addEventListener('pointerdown', (e) => {
      if (e.button !== 0 || !me()) return;
      tag.setPointerCapture(e.pointerId);
      this.drag = { tag, id: e.pointerId, x0: e.clientX, y0: e.clientY, moved: false, cell: { x: me().x, y: me().y } };
    });
    tag.addEventListener('pointermove', (e) => {
      const g = this.drag;
      if (!g || g.id !== e.pointerId) return;
      if (!g.moved && Math.hypot(e.clientX - g.x0, e.clientY - g.y0) < 6) return;
      g.moved = true;
      tag.classList.add('dragging');
      g.cell = this.cellAt(e.clientX, e.clientY);
      this.put(tag, g.cell.x, g.cell.y);
    });
    const end = (e, commit) => {
      const g = this.drag;
      if (!g || g.id !== e.pointerId) return;
      this.drag = null;
      tag.classList.remove('dragging');
      if (!g.moved) return; // a tap or a click: handled by the click listener
      const d = me();
      if (!commit || !d || (g.cell.x === d.x && g.cell.y === d.y)) { this.render(this.formation); return; }
      this.change(place(this.formation, name, g.cell.x, g.cell.y), `${name} to ${where(g.cell)}`);
    };
    tag.addEventListener('pointerup', (e) => end(e, true));
    tag.addEventListener('pointercancel', (e) => end(e, false));
    tag.addEventListener('click', () => {
      // Also after a drop: the form then shows where the dancer landed.
      const d = me();
      if (d) this.opts.onSelect?.(d);
    });
    tag.addEventListener('keydown', (e) => {
      const d = me();
      if (!d) return;
      const step = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, 1], ArrowDown: [0, -1] }[e.key];
      if (step && this.mirrored) step[0] = -step[0]; // the arrow moves the tag the way it points
      if (step) {
        e.preventDefault();
        const x = d.x + step[0], y = d.y + step[1];
        if (x < 1 || y < 1 || x > this.formation.grid.cols || y > this.formation.grid.rows) {
          this.opts.onError?.(`${name} is at the edge of the stage.`);
          return;
        }
        this.change(place(this.formation, name, x, y), `${name} to ${where({ x, y })}`);
      } else if (e.key === 'Delete' || e.key === 'Backspace') {
        e.preventDefault();
        this.change(remove(this.formation, name), `${name} off the stage`);
      }
    });
  }
}
