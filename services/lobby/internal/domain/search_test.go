package domain

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestQueryMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query, name string
		want        bool
	}{
		{"salsa", "Salsa Tuesday", true},
		{"SALSA", "salsa tuesday", true},
		{"tuesday salsa", "Salsa Tuesday", true},
		{"sal tue", "Salsa Tuesday", true},
		{"salsa monday", "Salsa Tuesday", false},
		{"", "anything", true},
		{"   ", "anything", true},
		// A letter typed without a mark matches it with any mark.
		{"cafe", "Café Crème", true},
		{"creme", "Café Crème", true},
		{"nino", "Niño y Niña", true},
		// A letter typed with a mark matches only that mark.
		{"café", "Café", true},
		{"CAFÉ", "café", true},
		{"café", "Cafe", false},
		{"niño", "Nino", false},
		{"ñ", "Año nuevo", true},
		{"ñ", "Ano nuevo", false},
		// Composed and decomposed forms are the same letter, on either side.
		{"cafe\u0301", "Café", true},
		{"café", "Cafe\u0301", true},
		// Full case folding: ß and ss, Greek final sigma.
		{"strasse", "Straße", true},
		{"ΟΔΟΣ", "οδος", true},
		{"über", "ÜBERGANG", true},
		{"uber", "Übergang", true},
		{"東京", "東京の夜", true},
		{"salsa", "Sals", false},
	}
	for _, tc := range tests {
		q, err := ParseQuery(tc.query)
		if err != nil {
			t.Fatalf("ParseQuery(%q) = %v", tc.query, err)
		}
		if got := q.Match(FoldName(tc.name)); got != tc.want {
			t.Errorf("ParseQuery(%q).Match(%q) = %v, want %v", tc.query, tc.name, got, tc.want)
		}
	}
}

func TestParseQueryRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, q := range []string{"a\x00b", "line\nbreak", strings.Repeat("x", 81), "\xff"} {
		if _, err := ParseQuery(q); !errors.Is(err, ErrInvalid) || !strings.HasSuffix(err.Error(), ".") {
			t.Errorf("ParseQuery(%q) = %v, want an ErrInvalid sentence", q, err)
		}
	}
	if _, err := ParseQuery(strings.Repeat("é", 80)); err != nil {
		t.Errorf("ParseQuery(80 × é) = %v, want nil (80 characters)", err)
	}
}

func TestPageToken(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.UnixMilli(1_800_000_000_000)
	pos := Position{LastActivity: 1_799_999_999_123, Code: "abc234"}
	f := Filter("salsa", false)
	tok := EncodePageToken(key, pos, f, now.Add(PageTokenTTL))
	if got, err := DecodePageToken(key, tok, f, now); err != nil || got != pos {
		t.Fatalf("DecodePageToken(EncodePageToken(%v)) = %v, %v", pos, got, err)
	}
	if got, err := DecodePageToken(key, tok, f, now.Add(PageTokenTTL-time.Millisecond)); err != nil || got != pos {
		t.Fatalf("DecodePageToken just before expiry = %v, %v", got, err)
	}
	refused := map[string]struct {
		token string
		f     [8]byte
		now   time.Time
		key   []byte
		want  error
	}{
		"expired":          {tok, f, now.Add(PageTokenTTL), key, errExpiredToken},
		"another query":    {tok, Filter("tango", false), now, key, errOtherSearch},
		"joinable added":   {tok, Filter("salsa", true), now, key, errOtherSearch},
		"another key":      {tok, f, now, []byte("another key"), ErrGarbledPageToken},
		"not base64":       {"%%%", f, now, key, ErrGarbledPageToken},
		"cut short":        {tok[:len(tok)-4], f, now, key, ErrGarbledPageToken},
		"empty after trim": {"AA", f, now, key, ErrGarbledPageToken},
		"very long":        {strings.Repeat("A", 400), f, now, key, ErrGarbledPageToken},
	}
	// Every single changed character is refused: the MAC covers the whole token.
	for i := range tok {
		b := []byte(tok)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		refused[fmt.Sprintf("changed at %d", i)] = struct {
			token string
			f     [8]byte
			now   time.Time
			key   []byte
			want  error
		}{string(b), f, now, key, ErrGarbledPageToken}
	}
	for name, tc := range refused {
		if _, err := DecodePageToken(tc.key, tc.token, tc.f, tc.now); err != tc.want {
			t.Errorf("DecodePageToken(%s) = %v, want %v", name, err, tc.want)
		}
	}
	for _, err := range []error{ErrGarbledPageToken, errExpiredToken, errOtherSearch} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%v is not an ErrInvalid", err)
		}
	}
}

func TestPositionOrder(t *testing.T) {
	t.Parallel()
	p := Position{LastActivity: 100, Code: "mmm"}
	tests := []struct {
		r    Room
		want bool
	}{
		{Room{LastActivity: 101, Code: "aaa"}, true},
		{Room{LastActivity: 100, Code: "zzz"}, true},
		{Room{LastActivity: 100, Code: "mmm"}, true},
		{Room{LastActivity: 100, Code: "aaa"}, false},
		{Room{LastActivity: 99, Code: "zzz"}, false},
	}
	for _, tc := range tests {
		if got := p.AtOrBefore(tc.r); got != tc.want {
			t.Errorf("%v.AtOrBefore(%v) = %v, want %v", p, tc.r, got, tc.want)
		}
	}
}
