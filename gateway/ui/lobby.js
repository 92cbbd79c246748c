// The lobby page: the active rooms a page at a time from GET /lobby/rooms (most recently active
// first), more as the list scrolls into view, a search box and a "leader here" filter, and the
// form that opens a room and takes its leader into it. The rooms shown are refreshed every
// POLL_MS (the API has no lobby stream): the first pages again, as many rooms as are shown.
import { $, api, ago, clock, el, parseClock, saveLeaderToken } from './common.js';

const POLL_MS = 1500;
const HIDDEN_POLL_MS = 15000;
const PAGE = 50; // rooms per page, the API's default
const MAX_PAGE = 200; // the API's largest page: a refresh covers at most this many rooms
let timer = 0;
const rows = new Map(); // code → {tr, tds}
let shown = []; // the rooms in the table, in order
let next = null; // the token of the page after the shown rooms, or null at the end
let search = { q: '', joinable: false };
let generation = 0; // bumped when the search changes: answers for an older one are dropped

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
  shown = rooms;
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
  $('no-rooms').hidden = rooms.length !== 0 || search.q !== '' || search.joinable;
  $('more-rooms').hidden = !next;
  const n = rooms.length;
  const rooms_ = `room${n === 1 ? '' : 's'}`;
  let text;
  if (search.q || search.joinable) {
    const what = [search.q && `named like “${search.q}”`, search.joinable && 'with their leader here'].filter(Boolean).join(' and ');
    text = n === 0 ? `No open rooms ${what}.` : `${next ? 'Showing ' : ''}${n} open ${rooms_} ${what}${next ? '; scroll for more' : ''}.`;
  } else {
    text = next ? `Showing the ${n} most recently active open rooms; scroll for more.` : `${n} ${rooms_} open. The list updates by itself.`;
  }
  // Only a change is written: the line is a live region, and a screen reader should not
  // announce every refresh.
  const status = $('rooms-status');
  if (status.textContent !== text) status.textContent = text;
  status.className = 'status ok';
}

function listURL(params) {
  const q = new URLSearchParams(params);
  if (search.q) q.set('q', search.q);
  if (search.joinable) q.set('joinable', 'true');
  return `/lobby/rooms?${q}`;
}

function showError(err) {
  const status = $('rooms-status');
  const text = `${err.message} Retrying…`;
  if (status.textContent !== text) status.textContent = text;
  status.className = 'status bad';
}

let inFlight = false;

/**
 * poll refreshes the shown rooms: the first page again, as large as the rooms shown (up to
 * MAX_PAGE). Rooms shown beyond that keep their place and token, without the ones the fresh
 * page already has (a room that became active moved to the front).
 */
async function poll() {
  clearTimeout(timer);
  if (inFlight) return; // the poll under way schedules the next one
  inFlight = true;
  const gen = generation;
  try {
    const limit = Math.min(MAX_PAGE, Math.max(PAGE, shown.length));
    const res = await api('GET', listURL({ limit }));
    if (gen === generation) {
      const head = res.rooms || [];
      if (shown.length <= limit) {
        next = res.nextPageToken || null;
        render(head);
      } else {
        const codes = new Set(head.map((r) => r.code));
        render(head.concat(shown.slice(limit).filter((r) => !codes.has(r.code))));
      }
    }
  } catch (err) {
    if (gen === generation) showError(err);
  }
  if (gen !== generation) return; // the search changed: restart's poll keeps the refreshes going
  inFlight = false;
  timer = setTimeout(poll, document.hidden ? HIDDEN_POLL_MS : POLL_MS);
  fillView();
}

let loadingMore = false;

/** loadMore appends the next page. An expired or refused token starts the list again. */
async function loadMore() {
  if (!next || loadingMore) return;
  loadingMore = true;
  const gen = generation;
  try {
    const res = await api('GET', listURL({ limit: PAGE, pageToken: next }));
    if (gen === generation) {
      const codes = new Set(shown.map((r) => r.code));
      next = res.nextPageToken || null;
      render(shown.concat((res.rooms || []).filter((r) => !codes.has(r.code))));
    }
  } catch (err) {
    if (gen === generation) {
      if (err.status === 400) {
        restart(); // the token expired (an hour) or the lobby's key changed: from the top
      } else {
        showError(err);
      }
    }
  }
  if (gen !== generation) return;
  loadingMore = false;
  fillView();
}

// More rooms load as the end of the list comes near the screen.
const nearEnd = new IntersectionObserver((entries) => {
  if (entries.some((e) => e.isIntersecting)) loadMore();
}, { rootMargin: '600px 0px' });
nearEnd.observe($('rooms-end'));

/** fillView loads more while the end of the list is still on screen (a tall window). */
function fillView() {
  const r = $('rooms-end').getBoundingClientRect();
  if (next && r.top < window.innerHeight + 600) loadMore();
}

$('more-rooms').addEventListener('click', () => loadMore());

/** restart shows the first page of the current search. */
function restart() {
  generation++;
  next = null;
  loadingMore = false;
  inFlight = false;
  render([]);
  $('rooms-status').textContent = 'Loading rooms…';
  poll();
}

let searchTimer = 0;
function searchChanged() {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => {
    const q = $('room-search').value.trim();
    const joinable = $('joinable').checked;
    if (q === search.q && joinable === search.joinable) return;
    search = { q, joinable };
    restart();
  }, 250);
}
$('room-search').addEventListener('input', searchChanged);
$('joinable').addEventListener('change', searchChanged);
$('search').addEventListener('submit', (e) => { e.preventDefault(); searchChanged(); });

// "Open a room" is in the bar that stays on screen: it takes you to the form, name first.
$('open-room').addEventListener('click', (e) => {
  e.preventDefault();
  $('create-heading').scrollIntoView({ block: 'start' });
  $('room-name').focus({ preventScroll: true });
});

// A lobby in a background tab asks rarely, and catches up the moment it is shown again.
document.addEventListener('visibilitychange', () => {
  if (!document.hidden) poll();
});

// "Last activity" ages between polls too.
setInterval(() => render(shown), 10000);

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
