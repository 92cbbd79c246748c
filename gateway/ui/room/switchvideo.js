// Switching everyone to another video (the leader's): the next file's length is read from it
// on this device, its title from its name; a reload frame with both goes to the room, and
// every viewer is asked to pick their own copy.
//
// It owns #switch (its form).
import { $, clock } from '../common.js';
import { role } from './context.js';
import { hint } from './leader.js';
import { loadFile } from './player.js';
import { control } from './socket.js';

function switchForm() {
  let picked = null; // {file, durationMs}
  const err = $('switch-error');
  $('switch-file').addEventListener('change', () => {
    err.textContent = '';
    picked = null;
    $('switch-length').textContent = '';
    const f = $('switch-file').files[0];
    if (!f) return;
    $('switch-title').value = f.name.replace(/\.[^.]+$/, '').slice(0, 200);
    const probe = document.createElement('video');
    probe.preload = 'metadata';
    const url = URL.createObjectURL(f);
    probe.onloadedmetadata = () => {
      URL.revokeObjectURL(url);
      if (!Number.isFinite(probe.duration) || probe.duration <= 0) {
        err.textContent = 'This browser cannot tell how long that video is. Pick another file (WebM or MP4 usually work).';
        return;
      }
      picked = { file: f, durationMs: Math.round(probe.duration * 1000) };
      $('switch-length').textContent = `Length: ${clock(picked.durationMs)}`;
    };
    probe.onerror = () => {
      URL.revokeObjectURL(url);
      err.textContent = 'This browser cannot play that file. Pick another copy of the video (WebM or MP4 usually work).';
    };
    probe.src = url;
  });
  $('switch-form').addEventListener('submit', (e) => {
    e.preventDefault();
    err.textContent = '';
    const title = $('switch-title').value.trim();
    if (!picked) { err.textContent = 'Pick the video file first: its length is read from it.'; $('switch-file').focus(); return; }
    if (!title || [...title].length > 200 || /\p{Cc}/u.test(title)) {
      err.textContent = 'Give the video a title of 1–200 characters.';
      $('switch-title').focus();
      return;
    }
    if (picked.durationMs > 24 * 3600 * 1000) { err.textContent = 'A video can be at most 24 hours long.'; return; }
    if (!control({ type: 'reload', video: { title, durationMs: picked.durationMs } })) return;
    loadFile(picked.file, true);
    $('switch').open = false;
    $('switch-file').value = '';
    $('switch-title').value = '';
    $('switch-length').textContent = '';
    picked = null;
    hint(`Switched everyone to “${title}”. Viewers are asked to pick their copy.`);
  });
}

if (role === 'leader') switchForm();
