package uitest

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chatPeopleJS lists the names the chat page's "Who is here" list shows, in its order.
const chatPeopleJS = `Array.from(document.querySelectorAll('#people li .who'), e => e.textContent).join('|')`

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
	alice.waitFor("alice lists herself", chatPeopleJS+` === 'Alice' && document.getElementById('people-count').textContent === '1'`, 10*time.Second)
	bob := newPage(t, browser, "bob")
	join(bob, "Bob 日本")
	bob.waitFor("bob sees both", chatPeopleJS+` === 'Alice|Bob 日本'`, 10*time.Second)
	alice.waitFor("alice sees bob join", chatPeopleJS+` === 'Alice|Bob 日本' && document.getElementById('people-count').textContent === '2'`, 10*time.Second)
	var mine string
	bob.eval(`document.querySelector('#people li:last-child').textContent`, &mine)
	if mine != "Bob 日本 (you)" {
		t.Errorf("bob's own line = %q, want %q", mine, "Bob 日本 (you)")
	}
	alice.screenshot("chat-people")
	bob.close()
	alice.waitFor("alice sees bob leave", chatPeopleJS+` === 'Alice' && document.getElementById('people-count').textContent === '1'`, 15*time.Second)
}
