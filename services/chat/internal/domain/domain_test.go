package domain

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateRoom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		room string
		ok   bool
	}{
		{"general", true}, {"a-b", true}, {"ab", true}, {"replay", true}, {"orders/42", true},
		{"Order:42", true}, {"a b", true}, {"日報", true}, {"{team}", true}, {strings.Repeat("a", MaxRoom), true},
		{strings.Repeat("a", MaxRoom+1), false}, {"", false}, {"a\nb", false}, {"\xff", false},
		{strings.Repeat("日", 43), false}, // 129 bytes
	} {
		err := ValidateRoom(tc.room)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateRoom(%q) = %v, want ok=%v", tc.room, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateRoom(%q) = %v, want ErrInvalid", tc.room, err)
		}
	}
}

func TestValidatePost(t *testing.T) {
	t.Parallel()
	ok := Post{Room: "general", UserID: "u1", User: "Ann", Body: "hi"}
	for _, tc := range []struct {
		name   string
		edit   func(p *Post)
		errHas string
	}{
		{"valid", func(*Post) {}, ""},
		{"body of 4096 runes", func(p *Post) { p.Body = strings.Repeat("é", MaxBody) }, ""},
		{"empty body", func(p *Post) { p.Body = "" }, "body must be 1 to 4096"},
		{"body too long", func(p *Post) { p.Body = strings.Repeat("x", MaxBody+1) }, "body must be 1 to 4096"},
		{"bad utf-8", func(p *Post) { p.Body = "\xff" }, "UTF-8"},
		{"no user id", func(p *Post) { p.UserID = "" }, "userId"},
		{"control char in user id", func(p *Post) { p.UserID = "a\nb" }, "userId"},
		{"long username", func(p *Post) { p.User = strings.Repeat("x", MaxUsername+1) }, "username"},
		{"bad room", func(p *Post) { p.Room = "a\tb" }, "room must be 1 to 128 bytes"},
		{"long username in runes", func(p *Post) { p.User = strings.Repeat("익", MaxUsername+1) }, "username must be 1 to 64 characters."},
		{"username of 64 runes", func(p *Post) { p.User = strings.Repeat("익", MaxUsername) }, ""},
		{"long post id", func(p *Post) { p.PostID = strings.Repeat("x", MaxPostID+1) }, "postId"},
	} {
		p := ok
		tc.edit(&p)
		err := ValidatePost(&p)
		switch {
		case tc.errHas == "" && err != nil:
			t.Errorf("%s: ValidatePost = %v, want nil", tc.name, err)
		case tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)):
			t.Errorf("%s: ValidatePost = %v, want an error containing %q", tc.name, err, tc.errHas)
		}
	}
	p := Post{Room: "general", UserID: "u-7", Body: "x"}
	if err := ValidatePost(&p); err != nil || p.User != DefaultUsername {
		t.Errorf("ValidatePost without username = %v, user %q; want nil, %q", err, p.User, DefaultUsername)
	}
}

func TestValidatePage(t *testing.T) {
	t.Parallel()
	n := func(v int64) *int64 { return &v }
	p, err := ValidatePage(0, nil, nil, 50)
	if err != nil || p.Limit != 50 {
		t.Errorf("ValidatePage(0) = %+v, %v; want limit 50", p, err)
	}
	p, err = ValidatePage(10, n(5), nil, 50)
	if err != nil || p.Before != 5 {
		t.Errorf("ValidatePage(before 5) = %+v, %v", p, err)
	}
	p, err = ValidatePage(10, nil, n(0), 50)
	if err != nil || !p.HasSince || p.Since != 0 {
		t.Errorf("ValidatePage(since 0) = %+v, %v", p, err)
	}
	for _, bad := range []struct {
		limit         int
		before, since *int64
	}{{-1, nil, nil}, {MaxPage + 1, nil, nil}, {1, n(0), nil}, {1, nil, n(-1)}, {1, n(3), n(1)},
		{1, n(1 << 53), nil}, {1, nil, n(1 << 53)}, {1, nil, n(1e17)}} {
		if _, err := ValidatePage(bad.limit, bad.before, bad.since, 50); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidatePage(%d, %v, %v) = %v, want ErrInvalid", bad.limit, bad.before, bad.since, err)
		}
	}
}
