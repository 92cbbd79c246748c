// The keyboard, for hands that are busy dancing. Space plays or pauses (the leader's), Shift+
// Space counts in and plays, ← / → move five seconds, [ and ] set the loop's ends at the
// playhead, m mirrors the picture, c turns the camera on or off, 1-4 pick a speed, and ? lists
// them all. Nothing happens while typing in a field, on a focused button (Space presses it),
// on the stage (arrows move a dancer there), or with Ctrl, Alt or Meta held.
//
// It owns #keys-open (the "Keyboard shortcuts" button), #keys-note and #keys-help (the list).
import { $, el } from '../common.js';
import { toggleCamera } from './camera.js';
import { startCountIn } from './countin.js';
import { role } from './context.js';
import { play } from './leader.js';
import { toggleMirror } from './mirror.js';
import { positionMs, seekTo, video } from './player.js';
import { setLoop } from './loop.js';
import { PRESETS, setRate } from './speed.js';
import * as state from './state.js';

/** SHORTCUTS are the keys, what they do, and who they are for (every page, or the leader's). */
export const SHORTCUTS = [
  { keys: ['Space'], what: 'Play or pause', leader: true },
  { keys: ['Shift', 'Space'], what: 'Count in, then play', leader: true },
  { keys: ['←', '→'], what: 'Back or forward five seconds', leader: true },
  { keys: ['['], what: 'Start the loop here (at the playhead)', leader: true },
  { keys: [']'], what: 'End the loop here (at the playhead)', leader: true },
  { keys: ['1', '2', '3', '4'], what: `Speed ${PRESETS.map((r) => `${r}×`).join(', ')}`, leader: true },
  { keys: ['m'], what: 'Mirror the picture' },
  { keys: ['c'], what: 'Turn your camera on or off' },
  { keys: ['?'], what: 'Show or hide this list' },
];

let loopStart = null; // the start [ set before ] (when no loop runs yet)

/** say writes the line under the shortcuts button: what a key just did. */
function say(text) { $('keys-note').textContent = text; }

/** typing says whether a key pressed on target belongs to it rather than to the page. */
function typing(target, key) {
  if (!(target instanceof Element)) return false;
  if (target.closest('input, textarea, select, [contenteditable=""], [contenteditable=true], #formation-stage')) return true;
  return (key === ' ' || key === 'Enter') && !!target.closest('button, a[href], summary');
}

const leading = () => role === 'leader' && !!state.get('loaded');

/** act does what key asks; false when the page has nothing to do with it. */
function act(e) {
  const loop = state.get('loop');
  switch (e.key) {
    case '?':
      toggleHelp();
      return true;
    case 'Escape':
      if ($('keys-help').hidden) return false;
      toggleHelp(false);
      return true;
    case 'm': case 'M':
      toggleMirror();
      return true;
    case 'c': case 'C':
      toggleCamera();
      return true;
    default:
  }
  if (!leading()) return false;
  switch (e.key) {
    case ' ':
      if (e.shiftKey) startCountIn();
      else if (video.paused) play();
      else video.pause();
      return true;
    case 'ArrowLeft':
      seekTo(positionMs() - 5000);
      return true;
    case 'ArrowRight':
      seekTo(positionMs() + 5000);
      return true;
    case '[':
      if (loop && positionMs() < loop.endMs) {
        loopStart = null;
        if (setLoop(positionMs(), loop.endMs)) say('The loop now starts at the playhead.');
      } else {
        loopStart = positionMs();
        say('The loop starts here once you press ] where it should end.');
      }
      return true;
    case ']':
      if (setLoop(loopStart ?? loop?.startMs ?? 0, positionMs())) { loopStart = null; say('The loop now ends at the playhead.'); }
      return true;
    case '1': case '2': case '3': case '4':
      setRate(PRESETS[Number(e.key) - 1]);
      return true;
    default:
      return false;
  }
}

/** toggleHelp shows or hides the list of shortcuts (show: true, false, or the other way round). */
function toggleHelp(show = $('keys-help').hidden) {
  $('keys-help').hidden = !show;
  $('keys-open').setAttribute('aria-expanded', String(show));
  if (show) $('keys-close').focus();
  else if (document.activeElement === $('keys-close') || $('keys-help').contains(document.activeElement)) $('keys-open').focus();
}

function renderHelp() {
  const rows = SHORTCUTS.filter((s) => !s.leader || role === 'leader').map((s) => el('div', { class: 'key-row' },
    el('dt', {}, ...s.keys.flatMap((k, i) => [i ? (s.keys[0] === 'Shift' ? ' + ' : ' / ') : null, el('kbd', { text: k })]).filter(Boolean)),
    el('dd', { text: s.what })));
  $('keys-list').replaceChildren(...rows);
  $('keys-who').textContent = role === 'leader'
    ? 'They work anywhere on the page except while typing in a field.'
    : 'The leader plays, seeks, loops and sets the speed; these are yours. They work anywhere on the page except while typing in a field.';
}

document.addEventListener('keydown', (e) => {
  if (e.defaultPrevented || e.ctrlKey || e.altKey || e.metaKey || typing(e.target, e.key)) return;
  if (state.get('ended')) return;
  if (act(e)) e.preventDefault();
});
$('keys-open').addEventListener('click', () => toggleHelp());
$('keys-close').addEventListener('click', () => toggleHelp(false));
renderHelp();
