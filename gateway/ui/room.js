// The practice room page: room.html?code=<code>. The browser that created the room holds its
// leader token and leads; everyone else follows. Each person picks their own copy of the video
// (played from a blob: URL, never uploaded). The leader's player is the truth; the room stamps
// its sync frames with the room's clock, and every viewer follows the same timeline.
//
// The page is modules under room/, each owning one job and its own part of the page, reading
// and changing the shared state (room/state.js) and never another's elements: the socket and
// its protocol (socket.js), the room's clock (clock.js) and timeline (timeline.js), the player
// (player.js), the follower (follow.js), the leader's controls (leader.js), one module per
// practice tool (speed.js, loop.js, countin.js, mirror.js, and practice.js for the line they
// share), marks, formations, people, switching videos, the keyboard (keys.js), the camera
// (camera.js), the dancer's takes (takes.js) and the chat (roomchat.js). docs/UI.md draws
// them. This module wires them and owns the room's heading, its info line, the notice when it
// closes and the error line.
import { $, api, clock } from './common.js';
import { currentOffset, serverNow } from './room/clock.js';
import { code, role, validCode } from './room/context.js';
import { currentDrift } from './room/follow.js';
import { video } from './room/player.js';
import { connect, endedSentence } from './room/socket.js';
import * as state from './room/state.js';
import { timeline } from './room/timeline.js';
import './room/leader.js';
import './room/practice.js';
import './room/speed.js';
import './room/loop.js';
import './room/countin.js';
import './room/marks.js';
import './room/formations.js';
import './room/people.js';
import './room/switchvideo.js';
import './room/mirror.js';
import './room/keys.js';
import './room/camera.js';
import './room/takes.js';
import { startRoomChat } from './room/roomchat.js';

function renderInfo() {
  const v = state.get('video');
  const parts = [];
  if (v) parts.push(`Video: ${v.title} (${clock(v.durationMs)})`);
  parts.push(`Room code: ${code}`);
  parts.push(role === 'leader' ? 'You lead this room.' : 'You follow the leader.');
  $('room-info').textContent = parts.join(' · ');
}

state.subscribe(['video'], renderInfo);
state.subscribe(['error'], () => { $('room-error').textContent = state.get('error') || ''; });
state.subscribe(['ended'], () => {
  $('ended-text').textContent = state.get('ended');
  $('ended').hidden = false;
});

/** For the browser tests and the curious: the room as this page sees it. */
window.vigilRoom = {
  room: state.roomView(), video, role, timeline, get drift() { return currentDrift(); }, get offset() { return currentOffset(); }, serverNow,
  get mirrored() { return !!state.get('mirrored'); }, state,
};

async function start() {
  if (!validCode) {
    state.set({ ended: 'This link has no valid room code. Pick a room from the list.' });
    return;
  }
  renderInfo();
  try {
    const r = await api('GET', `/lobby/rooms/${encodeURIComponent(code)}`);
    const info = r.room || r;
    $('room-name').textContent = info.name;
    document.title = `${info.name} · Vigil`;
    state.set({ video: info.video, viewers: info.viewers, leaderPresent: info.leaderPresent });
  } catch (err) {
    if (err.status === 404) { state.set({ ended: endedSentence('') }); return; }
    state.set({ error: err.message });
  }
  connect();
  startRoomChat();
}

start();
