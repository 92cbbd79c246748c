// Who this page is: the room's code from the link, and the leader's token when this browser
// opened the room (then it leads; everyone else, or anyone with &as=viewer, follows).
import { leaderToken } from '../common.js';

const params = new URLSearchParams(location.search);

/** code is the room's code from room.html?code=<code>. */
export const code = (params.get('code') || '').trim().toLowerCase();

/** token is the leader token this browser holds for the room ('' for a viewer). */
export const token = params.get('as') === 'viewer' ? '' : leaderToken(code);

/** role is 'leader' or 'viewer'. */
export const role = token ? 'leader' : 'viewer';

/** validCode says whether the link carries a room code at all. */
export const validCode = /^[a-z0-9](?:[a-z0-9-]{1,38}[a-z0-9])$/.test(code);
