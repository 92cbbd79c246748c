// Shared pieces of Vigil's pages. User data reaches the page only as text (el() sets
// textContent and appends strings as Text nodes); nothing is ever parsed as HTML.

/** el builds an element: el('a', {href: '/x', text: 'label'}, child, 'more text'). */
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = String(v);
    else if (k === 'class') e.className = v;
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

/** $ finds one element by id. */
export const $ = (id) => document.getElementById(id);

/**
 * api calls the gateway's REST routes and returns the decoded JSON (null for 204). Failures
 * throw an Error whose message is the server's sentence, or one a person can act on.
 */
export async function api(method, path, body, headers = {}) {
  const init = { method, headers: { Accept: 'application/json', ...headers } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers['Content-Type'] = 'application/json';
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch {
    throw Object.assign(new Error('Cannot reach the server. Check your connection; the page keeps trying.'), { status: 0 });
  }
  if (res.status === 204) return null;
  let data = null;
  try { data = await res.json(); } catch { /* not JSON: handled below */ }
  if (!res.ok) {
    const msg = (data && typeof data.error === 'string' && data.error) || `The server answered ${res.status} ${res.statusText}.`;
    throw Object.assign(new Error(msg), { status: res.status });
  }
  return data;
}

/** socketURL is a WebSocket URL on this page's host. */
export function socketURL(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${path}?${q}`;
}

function randomID(prefix) {
  const b = new Uint8Array(8);
  crypto.getRandomValues(b);
  return prefix + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** clientId is this browser's stable id (chat userId, room clientId). */
export function clientId() {
  let id = localStorage.getItem('vigil.clientId');
  if (!id) {
    id = randomID('c-');
    localStorage.setItem('vigil.clientId', id);
  }
  return id;
}

/** savedName is the name this browser chats under ('' until one is given). */
export function savedName() { return localStorage.getItem('vigil.username') || ''; }
export function saveName(n) { localStorage.setItem('vigil.username', n); }

/** leaderToken is the token saved when this browser created room code, or ''. */
export function leaderToken(code) { return localStorage.getItem('vigil.leader.' + code) || ''; }
export function saveLeaderToken(code, token) { localStorage.setItem('vigil.leader.' + code, token); }
export function forgetLeaderToken(code) { localStorage.removeItem('vigil.leader.' + code); }

/** clock formats milliseconds as m:ss (or h:mm:ss). */
export function clock(ms) {
  const s = Math.max(0, Math.floor((ms || 0) / 1000));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  const mm = h ? String(m).padStart(2, '0') : String(m);
  return (h ? h + ':' : '') + mm + ':' + String(r).padStart(2, '0');
}

/** parseClock reads "m:ss", "h:mm:ss" or plain seconds; NaN when it can't. */
export function parseClock(text) {
  const parts = String(text).trim().split(':');
  if (parts.length > 3 || parts.some((p) => !/^\d+$/.test(p))) return NaN;
  return parts.reduce((acc, p) => acc * 60 + Number(p), 0) * 1000;
}

/** ago says how long ago a ms timestamp was, in words. */
export function ago(ms, now = Date.now()) {
  if (!ms) return 'never';
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 5) return 'just now';
  if (s < 60) return `${s} s ago`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min ago`;
  return `${Math.round(m / 60)} h ago`;
}

/** setStatus shows a connection state: kind is ok, warn or bad. */
export function setStatus(node, text, kind) {
  node.textContent = text;
  node.className = 'status ' + (kind || '');
}

/**
 * ChatPanel is a chat room in a page: history on join, live messages, and reconnect with
 * resume (since=<last id>) after a network blip. Messages are rendered with textContent only.
 */
export class ChatPanel {
  /**
   * @param {HTMLElement} root where the panel goes
   * @param {{room: string, userId: string, username: string, page?: boolean, onPresence?: (f: object) => void}} opts
   */
  constructor(root, opts) {
    this.opts = opts;
    this.lastId = 0;
    this.ws = null;
    this.stopped = false;
    this.retry = 0;
    this.timer = 0;
    this.status = el('p', { class: 'status', role: 'status', 'aria-live': 'polite' });
    this.list = el('ol', { class: 'messages', 'aria-label': `Messages in ${opts.room}`, 'aria-live': 'polite', tabindex: '0' });
    this.input = el('input', { type: 'text', id: `chat-input-${opts.room}`, maxlength: '4096', autocomplete: 'off', 'aria-label': 'Message' });
    this.sendButton = el('button', { type: 'submit', class: 'primary', text: 'Send' });
    this.error = el('p', { class: 'error', role: 'alert' });
    this.form = el('form', { class: 'send', onsubmit: (e) => { e.preventDefault(); this.send(); } }, this.input, this.sendButton);
    this.root = el('div', { class: 'chat' + (opts.page ? ' page' : '') }, this.status, this.list, this.form, this.error);
    root.append(this.root);
    window.addEventListener('online', () => this.reconnectNow());
    window.addEventListener('offline', () => setStatus(this.status, 'Offline: messages will arrive when the connection is back.', 'bad'));
    this.connect();
  }

  connect() {
    clearTimeout(this.timer);
    if (this.stopped) return;
    const o = this.opts;
    setStatus(this.status, this.lastId ? 'Reconnecting…' : 'Connecting…', 'warn');
    const ws = new WebSocket(socketURL('/websocket', {
      room: o.room, userId: o.userId, username: o.username, since: this.lastId || undefined,
      presence: o.onPresence ? '1' : undefined,
    }));
    this.ws = ws;
    ws.onopen = () => {
      this.retry = 0;
      setStatus(this.status, `Connected as ${o.username}.`, 'ok');
    };
    ws.onmessage = (ev) => this.onFrame(ev.data);
    ws.onclose = (ev) => {
      if (this.ws !== ws || this.stopped) return;
      this.ws = null;
      // Every close is treated as a blip: reconnect with backoff and resume after lastId.
      const wait = Math.min(5000, 500 * 2 ** this.retry++);
      const why = ev.reason ? ` (${ev.reason})` : '';
      setStatus(this.status, `Disconnected${why}. Reconnecting in ${Math.ceil(wait / 1000)} s…`, 'bad');
      this.timer = setTimeout(() => this.connect(), wait);
    };
  }

  reconnectNow() {
    if (this.ws || this.stopped) return;
    this.retry = 0;
    this.connect();
  }

  onFrame(data) {
    let f;
    try { f = JSON.parse(data); } catch { return; }
    if (f.type === 'history') {
      for (const m of f.messages || []) this.add(m);
    } else if (f.type === 'message') {
      this.add(f);
    } else if (f.type === 'error') {
      this.error.textContent = f.error || 'The chat refused that message.';
    } else if ((f.type === 'presence' || f.type === 'join' || f.type === 'leave') && this.opts.onPresence) {
      this.opts.onPresence(f); // who is here (opts.onPresence asks for it: presence=1)
    }
  }

  /** add shows a message once: ids only grow, so anything at or below lastId is a repeat. */
  add(m) {
    if (typeof m.id !== 'number' || m.id <= this.lastId) return;
    this.lastId = m.id;
    const nearBottom = this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 40;
    const when = new Date(m.ts || Date.now());
    const li = el('li', { class: m.userId === this.opts.userId ? 'mine' : '', 'data-id': m.id },
      el('time', { datetime: when.toISOString(), text: when.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) }),
      el('span', { class: 'who', text: m.user || 'someone' }),
      el('span', { class: 'body', text: m.body }));
    this.list.append(li);
    if (nearBottom) this.list.scrollTop = this.list.scrollHeight;
  }

  send() {
    const body = this.input.value;
    this.error.textContent = '';
    if (!body.trim()) {
      this.error.textContent = 'Type a message first.';
      return;
    }
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
      this.error.textContent = 'Not connected right now, so nothing was sent. Your message is kept; press Send again once connected.';
      return;
    }
    this.ws.send(JSON.stringify({ body }));
    this.input.value = '';
    this.input.focus();
  }

  /** stop closes the panel's socket for good. */
  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close(1000, 'leaving');
  }
}
