// The chat page: chat.html?room=<room> joins that room once the person has a name.
import { $, ChatPanel, clientId, el, savedName, saveName } from './common.js';

const roomPattern = /^[a-z0-9](?:[a-z0-9-]{1,38}[a-z0-9])$/;
const params = new URLSearchParams(location.search);
$('room').value = params.get('room') || 'general';
$('name').value = savedName();

// Who is here: the members of the room ({userId, username, since}, in order of arrival), set
// by the socket's presence frame (again on every reconnect) and kept by join and leave frames.
let members = [];

function renderPeople() {
  const me = clientId();
  $('people').replaceChildren(...members.map((m) => {
    const li = el('li', {}, el('span', { class: 'who', text: m.username }));
    li.dataset.userId = m.userId;
    if (m.userId === me) li.append(el('span', { class: 'muted', text: ' (you)' }));
    return li;
  }));
  $('people-count').textContent = String(members.length);
  $('people-box').hidden = false;
}

function onPresence(f) {
  if (f.type === 'presence') {
    members = f.members || [];
  } else if (f.type === 'join') {
    members = members.filter((m) => m.userId !== f.userId);
    members.push({ userId: f.userId, username: f.username, since: f.since });
  } else if (f.type === 'leave') {
    members = members.filter((m) => m.userId !== f.userId);
  }
  renderPeople();
}

function join(room, name) {
  $('join').hidden = true;
  $('title').textContent = `Chat: ${room}`;
  document.title = `${room} · Chat · Vigil`;
  window.vigilChat = new ChatPanel($('chat'), { room, userId: clientId(), username: name, page: true, onPresence });
  window.vigilChat.input.focus();
}

$('join').addEventListener('submit', (e) => {
  e.preventDefault();
  const room = $('room').value.trim().toLowerCase();
  const name = $('name').value.trim();
  const err = $('join-error');
  if (!roomPattern.test(room)) {
    err.textContent = 'Use a room name of 3–40 lowercase letters, digits or hyphens, like "general".';
    $('room').focus();
    return;
  }
  if (!name || name.length > 64) {
    err.textContent = 'Give your name (1–64 characters) so others know who is talking.';
    $('name').focus();
    return;
  }
  err.textContent = '';
  saveName(name);
  history.replaceState(null, '', `?room=${encodeURIComponent(room)}`);
  join(room, name);
});

if (params.get('room') && savedName() && roomPattern.test(params.get('room'))) {
  join(params.get('room'), savedName());
} else {
  (savedName() ? $('room') : $('name')).focus();
}
