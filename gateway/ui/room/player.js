// The player: the room's video as this person's own copy (picked with the file input, played
// from a blob: URL, never uploaded), the mute button, and the picture's mirroring. Other
// modules steer the video through its media API (currentTime, play, pause, playbackRate); this
// module alone owns its element's attributes, the file input and the notices about the file.
//
// State it sets: loaded ({name, video} once a file's metadata is read; null while there is
// none). Events it emits: fileAsked (the player let go of its file: pick the room's new video).
import { $, clock } from '../common.js';
import { role } from './context.js';
import * as state from './state.js';

/** video is the room's player. */
export const video = $('player');

let playerVideo = null; // the room video the loaded file was picked for ({title, durationMs})
let fileName = '';

/** positionMs is where the player is, in whole ms. */
export function positionMs() { return Math.round(video.currentTime * 1000); }

/** seekTo moves the player to ms, within the video. */
export function seekTo(ms) {
  video.currentTime = Math.max(0, Math.min(ms, (video.duration || 0) * 1000)) / 1000;
}

/** hasFile says whether a file is loaded far enough to know its length. */
export const hasFile = () => !!video.src && video.readyState >= 1;

/** loadFile plays a picked file, for the room's current video; shown names it in the file input too. */
export function loadFile(f, shown) {
  if (video.src) URL.revokeObjectURL(video.src);
  fileName = f.name;
  playerVideo = state.get('video');
  $('switch-notice').textContent = '';
  state.set({ loaded: null });
  video.src = URL.createObjectURL(f);
  video.load();
  if (shown) {
    const named = new DataTransfer(); // "your copy" now names the new file
    named.items.add(f);
    $('file').files = named.files;
  }
}

const sameVideo = (a, b) => !!a && !!b && a.title === b.title && a.durationMs === b.durationMs;

/** askForFile empties the player and asks for a copy of the room's (new) video. */
function askForFile() {
  if (video.src) URL.revokeObjectURL(video.src);
  video.removeAttribute('src');
  video.load();
  playerVideo = null;
  $('file').value = '';
  const v = state.get('video');
  $('switch-notice').textContent = `The leader switched to another video: “${v.title}” (${clock(v.durationMs)}). Pick your copy of it above to keep ${role === 'leader' ? 'leading' : 'following'}.`;
  state.set({ loaded: null });
  state.emit('fileAsked', v);
}

/** checkFile warns when the picked file's length differs from the room's video. */
function checkFile() {
  const w = $('file-warning');
  const room = state.get('video');
  if (!room || !Number.isFinite(video.duration) || !video.duration) { w.textContent = ''; return; }
  const diff = Math.abs(video.duration * 1000 - room.durationMs);
  w.textContent = diff > 2000
    ? `Your file is ${clock(video.duration * 1000)} long but the room's video is ${clock(room.durationMs)}: check that it is the same video.`
    : '';
}

$('file').addEventListener('change', () => {
  const f = $('file').files[0];
  if (f) loadFile(f);
});

video.addEventListener('loadedmetadata', () => {
  if (!video.src) return;
  checkFile();
  state.set({ loaded: { name: fileName, video: playerVideo } });
});

video.addEventListener('error', () => {
  state.set({ error: 'This browser cannot play that file. Pick another copy of the video (WebM or MP4 usually work).' });
});

state.on('session', () => {
  // Back from a blip after the leader switched videos: the file in the player is the old one.
  const v = state.get('video');
  if (playerVideo && v && !sameVideo(playerVideo, v)) askForFile();
  checkFile();
});
state.on('switched', askForFile);
state.on('reloadAsked', () => {
  if (role !== 'viewer' || !video.src) return;
  $('switch-notice').textContent = '';
  const src = video.src;
  video.removeAttribute('src');
  video.load();
  video.src = src;
  video.load();
});

const mirror = () => video.classList.toggle('mirrored', !!state.get('mirrored'));
state.subscribe(['mirrored'], mirror);
mirror();

state.subscribe(['ended'], () => {
  $('player-controls').hidden = true;
  $('switch-notice').textContent = '';
  $('file').disabled = true;
  video.pause();
});

$('mute').addEventListener('click', () => {
  video.muted = !video.muted;
  $('mute').textContent = video.muted ? 'Unmute' : 'Mute';
  $('mute').setAttribute('aria-pressed', String(video.muted));
});
