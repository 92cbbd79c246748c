package uitest

import (
	"testing"
	"time"
)

// peopleJS lists the names the "Who is here" list of a room page or the chat page shows, in
// its order.
const peopleJS = `Array.from(document.querySelectorAll('#people li .who'), e => e.textContent).join('|')`

// TestRoomPeopleList: the leader's page lists who is here, by the names the viewers chat
// under (or "Dancer N" before they give one), and follows viewers coming and going.
func TestRoomPeopleList(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	browser := newBrowser(t)
	code, token := openRoom(t, s, "Salsa Tuesday", "Routine", 60000)

	leader := newPage(t, browser, "leader")
	leader.open(s.url + "/ui/chat.html")
	leader.eval(`localStorage.setItem('vigil.username', 'Lía'); true`, new(bool))
	leader.openAsLeader(s, code, token)
	leader.waitFor("the leader lists itself", peopleJS+` === 'Lía' && document.getElementById('people-count').textContent === '1'`, 10*time.Second)

	viewer := newPage(t, browser, "viewer")
	viewer.open(s.url + "/ui/chat.html")
	viewer.eval(`localStorage.setItem('vigil.username', 'Ben 日本'); true`, new(bool))
	viewer.open(s.url + "/ui/room.html?code=" + code)
	viewer.waitFor("the viewer sees both", peopleJS+` === 'Lía|Ben 日本'`, 10*time.Second)
	leader.waitFor("the leader sees Ben join", peopleJS+` === 'Lía|Ben 日本' && document.getElementById('people-count').textContent === '2'`, 10*time.Second)
	viewer.checkOwnLine("Ben 日本")

	// A viewer without a name is a Dancer with a number.
	anon := newPage(t, browser, "anonymous")
	anon.open(s.url + "/ui/room.html?code=" + code)
	leader.waitFor("the leader sees a Dancer join", `/^Lía\|Ben 日本\|Dancer \d+$/.test(`+peopleJS+`)`, 10*time.Second)
	leader.screenshot("room-people")

	viewer.close()
	anon.close()
	leader.waitFor("the leader sees them leave", peopleJS+` === 'Lía'`, 15*time.Second)
}

// checkOwnLine checks that the last line of the page's "Who is here" list is the reader's
// own, name marked "(you)".
func (p *page) checkOwnLine(name string) {
	p.t.Helper()
	var line string
	p.eval(`document.querySelector('#people li:last-child').textContent`, &line)
	if want := name + " (you)"; line != want {
		p.t.Errorf("%s's own line in the people list = %q, want %q", p.name, line, want)
	}
}
