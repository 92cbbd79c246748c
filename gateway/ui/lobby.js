// The lobby page: the active rooms, refreshed every POLL_MS from GET /lobby/rooms (the API has
// no lobby stream), and the form that opens a room and takes its leader into it.
import { $, api, ago, clock, el, parseClock, saveLeaderToken } from './common.js';

const POLL_MS = 1500;
const HIDDEN_POLL_MS = 15000;
let timer = 0;
const rows = new Map(); // code → {tr, cells}
let lastRooms = [];

function roomLink(r) { return `room.html?code=${encodeURIComponent(r.code)}`; }

function cellsFor(r) {
  return [
    ['Room', el('a', { href: roomLink(r), text: r.name, class: 'room-link' })],
    ['Video', `${r.video?.title ?? ''} (${clock(r.video?.durationMs)})`],
    ['Viewers', String(r.viewers ?? 0)],
    ['Leader', r.leaderPresent ? 'present' : 'away'],
    ['Last activity', ago(r.lastActivity)],
  ];
}

/** render updates the table in place, so keyboard focus on a row's link survives a refresh. */
function render(rooms) {
  lastRooms = rooms;
  const tbody = $('rooms').tBodies[0];
  const seen = new Set();
  rooms.forEach((r, i) => {
    seen.add(r.code);
    let row = rows.get(r.code);
    const cells = cellsFor(r);
    if (!row) {
      const tds = cells.map(([label, v], j) => el('td', { 'data-label': label, class: j === 2 ? 'num viewers' : j === 3 ? 'leader' : '' }, v));
      row = { tr: el('tr', { 'data-code': r.code }, ...tds), tds };
      rows.set(r.code, row);
    } else {
      cells.forEach(([, v], j) => {
        if (j === 0) {
          const a = row.tds[0].firstChild;
          if (a.textContent !== r.name) a.textContent = r.name;
        } else if (row.tds[j].textContent !== v) {
          row.tds[j].textContent = v;
        }
      });
    }
    if (tbody.children[i] !== row.tr) tbody.insertBefore(row.tr, tbody.children[i] || null);
  });
  for (const [code, row] of rows) {
    if (!seen.has(code)) {
      row.tr.remove();
      rows.delete(code);
    }
  }
  $('rooms').hidden = rooms.length === 0;
  $('no-rooms').hidden = rooms.length !== 0;
}

let inFlight = false;

async function poll() {
  clearTimeout(timer);
  if (inFlight) return; // the poll under way schedules the next one
  inFlight = true;
  const status = $('rooms-status');
  try {
    const res = await api('GET', '/lobby/rooms');
    render(res.rooms || []);
    const n = (res.rooms || []).length;
    // Only a change is written: the line is a live region, and a screen reader should not
    // announce every refresh.
    const text = `${n} room${n === 1 ? '' : 's'} open. The list updates by itself.`;
    if (status.textContent !== text) status.textContent = text;
    status.className = 'status ok';
  } catch (err) {
    const text = `${err.message} Retrying…`;
    if (status.textContent !== text) status.textContent = text;
    status.className = 'status bad';
  }
  inFlight = false;
  timer = setTimeout(poll, document.hidden ? HIDDEN_POLL_MS : POLL_MS);
}

// A lobby in a background tab asks rarely, and catches up the moment it is shown again.
document.addEventListener('visibilitychange', () => {
  if (!document.hidden) poll();
});

// "Last activity" ages between polls too.
setInterval(() => render(lastRooms), 10000);

$('video-file').addEventListener('change', () => {
  const f = $('video-file').files[0];
  if (!f) return;
  if (!$('video-title').value.trim()) $('video-title').value = f.name.replace(/\.[^.]+$/, '');
  const v = document.createElement('video');
  v.preload = 'metadata';
  const url = URL.createObjectURL(f);
  v.onloadedmetadata = () => {
    if (Number.isFinite(v.duration) && v.duration > 0) $('video-length').value = clock(v.duration * 1000);
    URL.revokeObjectURL(url);
  };
  v.onerror = () => {
    $('create-error').textContent = 'This browser cannot read that file as a video; type the title and length instead.';
    URL.revokeObjectURL(url);
  };
  v.src = url;
});

$('create').addEventListener('submit', async (e) => {
  e.preventDefault();
  const err = $('create-error');
  err.textContent = '';
  const name = $('room-name').value.trim();
  const title = $('video-title').value.trim();
  const durationMs = parseClock($('video-length').value);
  if (!name) { err.textContent = 'Give the room a name.'; $('room-name').focus(); return; }
  if (!title) { err.textContent = 'Give the video a title.'; $('video-title').focus(); return; }
  if (!(durationMs > 0)) {
    err.textContent = 'Give the video length as minutes:seconds, like 3:45 (or pick the file to fill it in).';
    $('video-length').focus();
    return;
  }
  if (durationMs > 24 * 3600 * 1000) {
    err.textContent = 'A video can be at most 24 hours long.';
    $('video-length').focus();
    return;
  }
  const button = e.submitter || $('create').querySelector('button');
  button.disabled = true;
  try {
    const res = await api('POST', '/lobby/rooms', { name, video: { title, durationMs } });
    saveLeaderToken(res.code, res.leaderToken);
    location.assign(`room.html?code=${encodeURIComponent(res.code)}`);
  } catch (ex) {
    err.textContent = ex.message;
    button.disabled = false;
  }
});

poll();
