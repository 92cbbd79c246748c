package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestLobbyPagesOverREST pages through GET /lobby/rooms with limit and pageToken, searches with
// q and joinable, and checks every bad input is a 400 with the sentence API.md gives.
func TestLobbyPagesOverREST(t *testing.T) {
	t.Parallel()
	gw := startRoomStack(t, time.Hour)
	for i := range 7 {
		name := fmt.Sprintf("Salsa Tuesday %d", i)
		if i%2 == 1 {
			name = fmt.Sprintf("Café tango %d", i)
		}
		body, _ := json.Marshal(map[string]any{"name": name, "video": map[string]any{"title": "t", "durationMs": 1000}})
		if r := call(t, "POST", gw+"/lobby/rooms", string(body)); r.code != http.StatusCreated {
			t.Fatalf("POST /lobby/rooms = %d %s", r.code, r.raw)
		}
	}
	pages := func(query string) (names []string, count int) {
		next := ""
		for {
			u := gw + "/lobby/rooms?limit=3&" + query
			if next != "" {
				u += "&pageToken=" + url.QueryEscape(next)
			}
			r := call(t, "GET", u, "")
			if r.code != http.StatusOK {
				t.Fatalf("GET %s = %d %s", u, r.code, r.raw)
			}
			for _, raw := range r.body["rooms"].([]any) {
				names = append(names, raw.(map[string]any)["name"].(string))
			}
			count++
			tok, ok := r.body["nextPageToken"].(string)
			if !ok {
				if r.body["nextPageToken"] != nil {
					t.Fatalf("nextPageToken = %v, want a string or null", r.body["nextPageToken"])
				}
				return names, count
			}
			next = tok
		}
	}
	if names, n := pages(""); len(names) != 7 || n != 3 {
		t.Fatalf("paging by 3 = %d rooms on %d pages, want 7 on 3", len(names), n)
	}
	if names, _ := pages("q=SALSA"); len(names) != 4 {
		t.Fatalf("q=SALSA = %v, want the 4 salsa rooms", names)
	}
	if names, _ := pages("q=" + url.QueryEscape("cafe")); len(names) != 3 {
		t.Fatalf("q=cafe = %v, want the 3 café rooms", names)
	}
	if names, _ := pages("joinable=true"); len(names) != 0 {
		t.Fatalf("joinable=true = %v, want none (no leader is present)", names)
	}
	// A page without limit holds up to 50 rooms.
	if r := call(t, "GET", gw+"/lobby/rooms", ""); len(r.body["rooms"].([]any)) != 7 || r.body["nextPageToken"] != nil {
		t.Fatalf("GET /lobby/rooms = %s, want all 7 rooms and nextPageToken null", r.raw)
	}
	// Each page has its own ETag.
	first, second := getETag(t, gw+"/lobby/rooms?limit=3", ""), getETag(t, gw+"/lobby/rooms?limit=3&q=tango", "")
	if first == "" || first == second {
		t.Fatalf("ETags of two different pages = %q and %q, want two", first, second)
	}
	if code := getStatus(t, gw+"/lobby/rooms?limit=3", first); code != http.StatusNotModified {
		t.Fatalf("GET the same page with If-None-Match = %d, want 304", code)
	}

	tok := call(t, "GET", gw+"/lobby/rooms?limit=1&q=salsa", "").body["nextPageToken"].(string)
	bad := []struct{ query, want string }{
		{"limit=0", "limit must be an integer from 1 through 200."},
		{"limit=201", "limit must be an integer from 1 through 200."},
		{"limit=abc", "limit must be an integer from 1 through 200."},
		{"limit=99999999999", "limit must be an integer from 1 through 200."},
		{"pageToken=garbled", "This pageToken is not one the lobby gave out (it was changed or cut short); list again without pageToken to start from the first page."},
		{"q=tango&pageToken=" + url.QueryEscape(tok), "This pageToken belongs to another search: keep q and joinable the same while paging, or list again without pageToken."},
		{"joinable=maybe", "joinable must be true or false."},
		{"q=%00", "q must be at most 80 characters of text without control characters."},
	}
	for _, tc := range bad {
		r := call(t, "GET", gw+"/lobby/rooms?"+tc.query, "")
		if r.code != http.StatusBadRequest || r.body["error"] != tc.want {
			t.Errorf("GET /lobby/rooms?%s = %d %s, want 400 %q", tc.query, r.code, r.raw, tc.want)
		}
	}
}
