package uitest

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestChatPage: two people join a room on the chat page, get its history, see each other's
// messages live, and miss nothing across a network blip; markup in a message stays text.
func TestChatPage(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	browser := newBrowser(t)
	room := randomName("ui-chat")
	messagesURL := s.gateway.URL + "/chat/rooms/" + room + "/messages"

	const markup = `<img src=x onerror="window.pwned=1"><b>not bold</b>`
	postJSON(t, "POST", messagesURL, map[string]string{"userId": "carol-id", "username": "Carol <i>", "body": markup}, nil, 201)
	postJSON(t, "POST", messagesURL, map[string]string{"userId": "carol-id", "username": "Carol <i>", "body": "warm up first"}, nil, 201)

	alice, bob := newPage(t, browser, "alice"), newPage(t, browser, "bob")
	for _, p := range []struct {
		*page
		name string
	}{{alice, "Alice"}, {bob, "Bob"}} {
		p.open(s.url + "/ui/chat.html?room=" + room)
		p.run(
			chromedp.WaitVisible(chromedp.ID("name")),
			chromedp.SendKeys(chromedp.ID("name"), p.name),
			chromedp.Click(chromedp.CSS(`#join button[type=submit]`)),
		)
		p.waitFor("history shown", `document.querySelectorAll('ol.messages li').length === 2`, 10*time.Second)
		p.waitFor("connected", `document.querySelector('.chat [role=status]').textContent.startsWith('Connected')`, 10*time.Second)
	}

	// History: oldest first, and user input is text, never HTML.
	got := alice.messages()
	if got[0].Body != markup || got[0].User != "Carol <i>" || got[1].Body != "warm up first" {
		t.Fatalf("alice's history = %+v, want Carol's two messages as text, oldest first", got)
	}
	var injected bool
	alice.eval(`!!window.pwned || document.querySelector('ol.messages img, ol.messages b, ol.messages i') !== null`, &injected)
	if injected {
		t.Fatal("a message's markup was rendered as HTML")
	}

	// Live: Alice sends with the keyboard; both see it.
	alice.run(chromedp.SendKeys(chromedp.ID("chat-input-"+room), "hello from alice"+kb.Enter))
	alice.waitForMessage("hello from alice")
	bob.waitForMessage("hello from alice")
	var inputAfter string
	alice.eval(`document.getElementById('chat-input-`+room+`').value`, &inputAfter)
	if inputAfter != "" {
		t.Errorf("input after sending = %q, want it cleared", inputAfter)
	}
	alice.screenshot("chat")
	bob.checkPlain("")

	// A network blip: every socket drops and reconnects are refused for a while. A message
	// posted meanwhile arrives once the pages are back, exactly once.
	s.proxy.cut()
	for _, p := range []*page{alice, bob} {
		p.waitFor("disconnect shown", `document.querySelector('.chat [role=status]').textContent.startsWith('Disconnected')`, 10*time.Second)
	}
	postJSON(t, "POST", messagesURL, map[string]string{"userId": "carol-id", "username": "Carol", "body": "sent during the blip"}, nil, 201)
	s.proxy.heal()
	for _, p := range []*page{alice, bob} {
		p.waitForMessage("sent during the blip")
		p.waitFor("reconnected", `document.querySelector('.chat [role=status]').textContent.startsWith('Connected')`, 10*time.Second)
	}
	bob.run(chromedp.SendKeys(chromedp.ID("chat-input-"+room), "bob is back"+kb.Enter))
	alice.waitForMessage("bob is back")
	bob.waitForMessage("bob is back")

	want := []string{markup, "warm up first", "hello from alice", "sent during the blip", "bob is back"}
	for _, p := range []*page{alice, bob} {
		ms := p.messages() // also checks ids: no repeats, in order
		if len(ms) != len(want) {
			t.Fatalf("%s shows %d messages %+v, want %d", p.name, len(ms), ms, len(want))
		}
		for i, m := range ms {
			if m.Body != want[i] {
				t.Errorf("%s message %d = %q, want %q", p.name, i, m.Body, want[i])
			}
		}
	}
}

// TestChatPagePeopleList: the chat page shows who is in the room, in order of arrival, marks
// the reader, and follows people coming and going.
func TestChatPagePeopleList(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	browser := newBrowser(t)
	room := randomName("ui-here")
	join := func(p *page, name string) {
		t.Helper()
		p.open(s.url + "/ui/chat.html?room=" + room)
		p.run(
			chromedp.WaitVisible(chromedp.ID("name")),
			chromedp.SendKeys(chromedp.ID("name"), name),
			chromedp.Click(chromedp.CSS(`#join button[type=submit]`)),
		)
	}
	alice := newPage(t, browser, "alice")
	join(alice, "Alice")
	alice.waitFor("alice lists herself", peopleJS+` === 'Alice' && document.getElementById('people-count').textContent === '1'`, 10*time.Second)
	bob := newPage(t, browser, "bob")
	join(bob, "Bob 日本")
	bob.waitFor("bob sees both", peopleJS+` === 'Alice|Bob 日本'`, 10*time.Second)
	alice.waitFor("alice sees bob join", peopleJS+` === 'Alice|Bob 日本' && document.getElementById('people-count').textContent === '2'`, 10*time.Second)
	bob.checkOwnLine("Bob 日本")
	alice.screenshot("chat-people")
	bob.close()
	alice.waitFor("alice sees bob leave", peopleJS+` === 'Alice' && document.getElementById('people-count').textContent === '1'`, 15*time.Second)
}
