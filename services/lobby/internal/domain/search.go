package domain

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/vigil-dev/vigil/pkg/input"
)

// MaxQueryLen is the longest search query, in characters (a room name is at most 80).
const MaxQueryLen = 80

// How a search matches a room name (docs/LOBBY.md, "Search"):
//
//   - Case never matters: both sides are case-folded (Unicode full folding, so "STRASSE"
//     finds "Straße") and composed (NFC), so an "é" typed as one code point or as "e" plus a
//     combining accent is the same letter.
//   - A letter typed without a mark matches that letter with any mark: "cafe" finds "Café",
//     "nino" finds "Niño". People often leave accents out when they type, and a lobby search
//     should not need them.
//   - A letter typed with a mark matches only that mark: "niño" finds "Niño", not "Nino";
//     whoever types the accent means it.
//   - Every whitespace-separated word of the query must occur in the name, in any order:
//     "tuesday salsa" finds "Salsa Tuesday".

// Folded is a name prepared for searching: its case-folded letters, and the same letters
// without marks, one rune each, aligned.
type Folded struct {
	letters []rune
	bare    []rune
	// bareText is bare as a string: a word typed without marks matches exactly where it
	// occurs in it, so strings.Contains (vectorised) answers most searches.
	bareText string
}

var folder = cases.Fold()

// FoldName prepares a room name for Match.
func FoldName(name string) Folded {
	letters := []rune(norm.NFC.String(folder.String(name)))
	bare := make([]rune, len(letters))
	for i, r := range letters {
		bare[i] = baseLetter(r)
	}
	return Folded{letters: letters, bare: bare, bareText: string(bare)}
}

// Bare is the name folded and without marks, the text a Query's Probe word is looked for in:
// the word occurs in it exactly when it matches the name. It holds no control character.
func (f Folded) Bare() string { return f.bareText }

// baseLetter is r without its marks: the first rune of its canonical decomposition when the
// rest are all marks ("é" → "e", "ñ" → "n"), else r itself.
func baseLetter(r rune) rune {
	if r < 0x80 {
		return r
	}
	d := []rune(norm.NFD.String(string(r)))
	if len(d) < 2 {
		return r
	}
	for _, m := range d[1:] {
		if !unicode.Is(unicode.Mn, m) {
			return r
		}
	}
	return d[0]
}

// Query is a parsed search: its words, folded.
type Query struct {
	words []queryWord
}

type queryWord struct {
	letters []rune
	// allPlain: no letter carries a mark, so the word matches where text occurs in bareText.
	allPlain bool
	text     string
	// plain[i] is true when letters[i] carries no mark, so it also matches a marked letter.
	plain []bool
}

// ParseQuery checks and parses a search query; "" (or only spaces) matches every room.
func ParseQuery(q string) (Query, error) {
	if !input.Printable(q) || len([]rune(q)) > MaxQueryLen {
		return Query{}, invalid("q must be at most 80 characters of text without control characters.")
	}
	var out Query
	for _, w := range strings.Fields(q) {
		f := FoldName(w)
		qw := queryWord{letters: f.letters, plain: make([]bool, len(f.letters)), allPlain: true, text: string(f.letters)}
		for i := range f.letters {
			qw.plain[i] = f.bare[i] == f.letters[i]
			qw.allPlain = qw.allPlain && qw.plain[i]
		}
		out.words = append(out.words, qw)
	}
	return out, nil
}

// Probe is a word of q that matches a name exactly where it occurs in the name's Bare text
// (a word typed without marks), the longest such: a scan over many names can look for it
// first and check the rest of q only where it occurs. ok is false when q has no such word.
func (q Query) Probe() (word string, ok bool) {
	for _, w := range q.words {
		if w.allPlain && len(w.text) > len(word) {
			word, ok = w.text, true
		}
	}
	return word, ok
}

// Empty reports whether the query matches every room.
func (q Query) Empty() bool { return len(q.words) == 0 }

// Match reports whether every word of q occurs in the folded name.
func (q Query) Match(name Folded) bool {
	for _, w := range q.words {
		if !w.in(name) {
			return false
		}
	}
	return true
}

func (w queryWord) in(name Folded) bool {
	if w.allPlain {
		// A plain letter matches a name letter when it equals it or its bare form, and a
		// plain letter's bare form is itself: so exactly where it occurs in bareText.
		return strings.Contains(name.bareText, w.text)
	}
	n := len(w.letters)
	for start := 0; start+n <= len(name.letters); start++ {
		ok := true
		for i := 0; i < n; i++ {
			l := name.letters[start+i]
			if l != w.letters[i] && (!w.plain[i] || name.bare[start+i] != w.letters[i]) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
