// The room's chat: the chat room room-<code>, joined under the name this browser chats
// under, or after asking for one.
//
// It owns #chat-name and #chat.
import { $, ChatPanel, clientId, saveName, savedName } from '../common.js';
import { code } from './context.js';

function startChat(name) {
  $('chat-name').hidden = true;
  window.vigilChat = new ChatPanel($('chat'), { room: `room-${code}`, userId: clientId(), username: name });
}

$('chat-name').addEventListener('submit', (e) => {
  e.preventDefault();
  const name = $('chat-name-input').value.trim();
  if (!name || name.length > 64) {
    $('chat-name-error').textContent = 'Give your name (1–64 characters) to chat.';
    return;
  }
  saveName(name);
  startChat(name);
});

/** startRoomChat joins the chat under the saved name, or asks for a name. */
export function startRoomChat() {
  if (savedName()) startChat(savedName());
  else $('chat-name').hidden = false;
}
