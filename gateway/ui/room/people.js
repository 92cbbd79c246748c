// Who is here: the occupancy line ("2 viewers · leader present") and the list of people in
// the room, in order of arrival, with this person marked.
//
// It owns #occupancy, #people and #people-count.
import { $, clientId, el } from '../common.js';
import { role } from './context.js';
import * as state from './state.js';

function renderOccupancy() {
  if (state.get('ended')) { $('occupancy').textContent = 'Room closed.'; return; }
  const n = state.get('viewers') ?? 0;
  $('occupancy').textContent = `${n} viewer${n === 1 ? '' : 's'} · leader ${state.get('leaderPresent') ? 'present' : 'away'}`;
}

function renderPeople() {
  const me = clientId();
  const people = state.get('people');
  $('people').replaceChildren(...people.map((p) => {
    const li = el('li', { class: p.role === 'leader' ? 'leader' : 'viewer' });
    li.dataset.clientId = p.clientId;
    li.append(el('span', { class: 'who', text: p.name }));
    const tags = [];
    if (p.role === 'leader') tags.push('leader');
    if (p.clientId === me && p.role === role) tags.push('you');
    if (tags.length) li.append(el('span', { class: 'muted', text: ` (${tags.join(', ')})` }));
    return li;
  }));
  $('people-count').textContent = String(people.length);
}

state.subscribe(['viewers', 'leaderPresent', 'ended'], renderOccupancy);
state.subscribe(['people'], renderPeople);
