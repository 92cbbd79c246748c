// The operator's page: every POLL_MS it reads the alarm overview (GET /admin/alarms), the
// lobby's rooms, this gateway's /metrics (sockets, and firing lateness when the domains run in
// this process), and each domain's dead letters when it has any. Replay and discard call the
// admin routes. Everything reaches the page as text (el() and textContent), never as HTML.
import { $, api, ago, el } from './common.js';

const POLL_MS = 2000;
const WINDOW_MS = 5 * 60 * 1000;
const COLORS = ['#0a58ca', '#b42318', '#1a7f37', '#9a6700'];
const KEY = 'vigil.adminKey';

/** series: domain → [{t, ms}] samples of lateness over the last WINDOW_MS. */
const series = new Map();
/** lastBuckets: domain → {le → cumulative count} from the previous /metrics read. */
let lastBuckets = new Map();
/** armed is the discard button waiting for its confirming second press. */
let armed = null;

function headers() {
  const k = sessionStorage.getItem(KEY);
  return k ? { Authorization: 'Bearer ' + k } : {};
}

const adminAPI = (method, path) => api(method, path, undefined, headers());

/** metricsText reads this gateway's Prometheus text; '' when it can't. */
async function metricsText() {
  try {
    const res = await fetch('/metrics', { headers: headers() });
    return res.ok ? await res.text() : '';
  } catch {
    return '';
  }
}

/** samples parses the lines of one metric family: [{labels, value}]. */
function samples(text, name) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!m || m[1] !== name) continue;
    const labels = {};
    for (const [, k, v] of (m[2] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[k] = v;
    out.push({ labels, value: Number(m[3]) });
  }
  return out;
}

/**
 * firingP99 is the p99 lateness (ms) of each domain's firings since the last read, from the
 * histogram's bucket counts; a domain with no firings in between has none.
 */
function firingP99(text) {
  const now = new Map();
  for (const s of samples(text, 'vigil_alarm_lateness_seconds_bucket')) {
    const ns = s.labels.ns;
    if (!now.has(ns)) now.set(ns, new Map());
    now.get(ns).set(s.labels.le, s.value);
  }
  const p99 = new Map();
  for (const [ns, buckets] of now) {
    const before = lastBuckets.get(ns);
    if (!before) continue; // the first read only sets the baseline: older firings are not recent
    const les = [...buckets.keys()].sort((a, b) => (a === '+Inf' ? Infinity : Number(a)) - (b === '+Inf' ? Infinity : Number(b)));
    const total = (buckets.get('+Inf') || 0) - (before.get('+Inf') || 0);
    if (total <= 0) continue;
    for (const le of les) {
      if ((buckets.get(le) || 0) - (before.get(le) || 0) >= 0.99 * total) {
        p99.set(ns, le === '+Inf' ? 10000 : Number(le) * 1000);
        break;
      }
    }
  }
  lastBuckets = now;
  return p99;
}

function setText(id, v) {
  const n = $(id);
  const s = String(v);
  if (n.textContent !== s) n.textContent = s;
}

function renderDomains(domains) {
  const tbody = $('alarms').tBodies[0];
  tbody.replaceChildren(...domains.map((d) => {
    let oldest = '–';
    if (d.error) oldest = d.error;
    else if (d.oldestOverdue) oldest = `${d.oldestOverdue.id}, ${fmtMs(d.oldestOverdue.lateMs)} late`;
    return el('tr', { 'data-domain': d.domain },
      el('th', { scope: 'row', 'data-label': 'Domain', text: d.domain }),
      el('td', { 'data-label': 'Pending', class: 'num pending', text: d.error ? '–' : d.pending }),
      el('td', { 'data-label': 'Overdue', class: 'num overdue' + (d.overdue > 0 ? ' late' : ''), text: d.error ? '–' : d.overdue }),
      el('td', { 'data-label': 'In flight', class: 'num', text: d.error ? '–' : d.inFlight }),
      el('td', { 'data-label': 'Dead', class: 'num dead' + (d.dead > 0 ? ' late' : ''), text: d.error ? '–' : d.dead }),
      el('td', { 'data-label': 'Oldest overdue', class: 'oldest', text: oldest }));
  }));
}

function fmtMs(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60000).toFixed(1)} min`;
}

/** record adds this poll's lateness per domain and drops samples older than the window. */
function record(domains, p99, now) {
  for (const d of domains) {
    if (d.error) continue;
    const waiting = d.oldestOverdue ? d.oldestOverdue.lateMs : 0;
    const ms = Math.max(waiting, p99.get(d.domain) || 0);
    if (!series.has(d.domain)) series.set(d.domain, []);
    const s = series.get(d.domain);
    s.push({ t: now, ms });
    while (s.length && s[0].t < now - WINDOW_MS) s.shift();
  }
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

/** drawChart draws each domain's lateness over the window, on a scale that fits the worst. */
function drawChart(now) {
  const W = 640, H = 200, L = 48, B = 20, T = 8;
  const chart = $('lateness');
  let max = 10;
  for (const s of series.values()) for (const p of s) max = Math.max(max, p.ms);
  const nice = [10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000];
  max = nice.find((n) => n >= max) || max;
  const x = (t) => L + ((t - (now - WINDOW_MS)) / WINDOW_MS) * (W - L - 4);
  const y = (ms) => H - B - (ms / max) * (H - B - T);
  const parts = [];
  for (const f of [0, 0.5, 1]) {
    parts.push(svg('line', { class: 'grid', x1: L, x2: W - 4, y1: y(max * f), y2: y(max * f) }));
    const label = svg('text', { x: 4, y: y(max * f) + 4 });
    label.textContent = fmtMs(max * f);
    parts.push(label);
  }
  for (const [m, text] of [[0, '5 min ago'], [1, 'now']]) {
    const label = svg('text', { x: m ? W - 30 : L, y: H - 4 });
    label.textContent = text;
    parts.push(label);
  }
  const legend = [];
  [...series.keys()].sort().forEach((domain, i) => {
    const s = series.get(domain);
    const color = COLORS[i % COLORS.length];
    if (s.length) {
      parts.push(svg('polyline', {
        points: s.map((p) => `${x(p.t).toFixed(1)},${y(p.ms).toFixed(1)}`).join(' '),
        fill: 'none', stroke: color, 'stroke-width': 2, 'data-domain': domain,
      }));
    }
    const last = s.length ? s[s.length - 1].ms : 0;
    legend.push(el('li', { 'data-domain': domain }, el('span', { class: `swatch swatch-${i % COLORS.length}` }), `${domain}: ${fmtMs(last)} now`));
  });
  chart.replaceChildren(...parts);
  $('lateness-legend').replaceChildren(...legend);
}

async function renderDead(domains) {
  const lines = [];
  for (const d of domains) {
    if (d.error || !d.dead) continue;
    const res = await adminAPI('GET', `/admin/${encodeURIComponent(d.domain)}/dead-letters`);
    for (const x of res.deadLetters || []) lines.push({ domain: d.domain, ...x });
  }
  lines.sort((a, b) => a.deadAt - b.deadAt);
  const tbody = $('dead').tBodies[0];
  const focused = document.activeElement?.dataset?.key;
  tbody.replaceChildren(...lines.map((x) => {
    const key = `${x.domain}/${x.id}`;
    const replay = el('button', {
      type: 'button', class: 'primary replay', text: 'Replay', 'data-key': key + '/replay',
      'aria-label': `Replay the alarm of ${x.id} (${x.domain})`, onclick: () => act('replay', x),
    });
    const discard = el('button', {
      type: 'button', class: 'danger discard', text: armed === key ? 'Confirm discard' : 'Discard', 'data-key': key + '/discard',
      'aria-label': armed === key ? `Confirm: discard the alarm of ${x.id} (${x.domain})` : `Discard the alarm of ${x.id} (${x.domain})`,
      onclick: () => act('discard', x),
    });
    return el('tr', { 'data-key': key },
      el('td', { 'data-label': 'Domain', text: x.domain }),
      el('td', { 'data-label': 'Object', class: 'object', text: x.id }),
      el('td', { 'data-label': 'Attempts', class: 'num', text: x.attempts }),
      el('td', { 'data-label': 'Dead since', text: ago(x.deadAt) }),
      el('td', { 'data-label': 'Last error', class: 'error-text', text: x.error }),
      el('td', { 'data-label': 'Act', class: 'act' }, replay, discard));
  }));
  if (focused) tbody.querySelector(`[data-key="${CSS.escape(focused)}"]`)?.focus();
  $('dead').hidden = lines.length === 0;
  $('no-dead').hidden = lines.length !== 0;
}

async function act(action, x) {
  const key = `${x.domain}/${x.id}`;
  const result = $('dead-result');
  if (action === 'discard' && armed !== key) {
    armed = key; // a second press confirms
    await poll();
    return;
  }
  armed = null;
  const base = `/admin/${encodeURIComponent(x.domain)}/dead-letters/${encodeURIComponent(x.id)}`;
  try {
    if (action === 'replay') await adminAPI('POST', base + '/replay');
    else await adminAPI('DELETE', base);
    result.textContent = `${action === 'replay' ? 'Replayed' : 'Discarded'} the alarm of ${x.id} (${x.domain}).`;
    result.className = 'status ok';
  } catch (err) {
    result.textContent = `Could not ${action} ${x.id}: ${err.message}`;
    result.className = 'status bad';
  }
  await poll();
}

let timer = 0;
async function poll() {
  clearTimeout(timer);
  const status = $('status');
  try {
    const [overview, rooms, text] = await Promise.all([
      adminAPI('GET', '/admin/alarms'),
      api('GET', '/lobby/rooms', undefined, headers()).catch(() => null),
      metricsText(),
    ]);
    const domains = overview.domains || [];
    const by = new Map(domains.map((d) => [d.domain, d]));
    setText('count-holds', by.has('reservations') && !by.get('reservations').error ? by.get('reservations').pending : '–');
    setText('count-locks', by.has('locks') && !by.get('locks').error ? by.get('locks').pending : '–');
    setText('count-rooms', rooms ? (rooms.rooms || []).length : '–');
    const sockets = samples(text, 'vigil_gateway_sockets');
    setText('count-sockets', text ? sockets.reduce((n, s) => n + s.value, 0) : '–');
    renderDomains(domains);
    record(domains, firingP99(text), overview.now || Date.now());
    drawChart(overview.now || Date.now());
    await renderDead(domains);
    const late = domains.filter((d) => d.overdue > 0 || d.dead > 0).map((d) => d.domain);
    status.textContent = late.length
      ? `Attention: ${late.join(', ')} ${late.length === 1 ? 'has' : 'have'} overdue or dead alarms · updated ${new Date().toLocaleTimeString()}`
      : `Nothing late or dead · updated ${new Date().toLocaleTimeString()}`;
    status.className = 'status ' + (late.length ? 'warn' : 'ok');
  } catch (err) {
    status.textContent = err.status === 401 || err.status === 403
      ? `${err.message} Open "API key" above and give an admin key.`
      : `${err.message} Retrying…`;
    status.className = 'status bad';
    if (err.status === 401 || err.status === 403) $('key-panel').open = true;
  }
  clearTimeout(timer);
  timer = setTimeout(poll, POLL_MS);
}

$('key-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const k = $('api-key').value.trim();
  if (k) sessionStorage.setItem(KEY, k);
  $('api-key').value = '';
  poll();
});
$('forget-key').addEventListener('click', () => {
  sessionStorage.removeItem(KEY);
  poll();
});

poll();
