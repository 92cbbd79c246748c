package domain

import (
	"encoding/json"
	"fmt"
	"math"
)

// The practice tools: playback rate, count-in, the A-B loop and formations on marks. Their
// limits are stated here once; the transport, docs/API.md and the pages repeat them.

// Limits of the practice tools.
const (
	// Rates are kept in hundredths: 25 (0.25x) through 200 (2x) in steps of 5 (0.05).
	MinRateCenti  = 25
	MaxRateCenti  = 200
	RateStepCenti = 5
	// DefaultRateCenti is the rate of a room nobody set one for.
	DefaultRateCenti = 100
	MinCountBeats    = 1
	MaxCountBeats    = 16
	MinCountBPM      = 40
	MaxCountBPM      = 240
	// MaxDancers is how many dancers a formation may hold (formation.js's MAX_DANCERS).
	MaxDancers = 32
)

// Control kinds of the practice tools.
const (
	KindLoop          = "loop"
	KindMarkFormation = "markFormation"
)

// RateCenti converts a wire rate (0: unset, 1x) to hundredths, refusing a rate off the
// 0.05 grid or outside 0.25-2.
func RateCenti(rate float64) (int64, error) {
	if rate == 0 {
		return DefaultRateCenti, nil
	}
	c := math.Round(rate * 100)
	if math.IsNaN(rate) || math.Abs(rate*100-c) > 1e-6 || int64(c)%RateStepCenti != 0 || c < MinRateCenti || c > MaxRateCenti {
		return 0, Invalid("rate must be from 0.25 to 2 in steps of 0.05 (0.5, 0.75 and 1 are the usual ones).")
	}
	return int64(c), nil
}

// CountIn is a count of beats before playback starts.
type CountIn struct {
	Beats, BPM int64
}

// Ms is how long the count lasts: the video starts this long after the sync's stamp.
func (c CountIn) Ms() int64 {
	if c.Beats == 0 || c.BPM == 0 {
		return 0
	}
	return (c.Beats*60000 + c.BPM/2) / c.BPM
}

// CheckCountIn validates a count-in of a sync.
func CheckCountIn(c *CountIn, playing bool) error {
	if c == nil {
		return nil
	}
	if !playing {
		return Invalid("A count-in starts playback: send it with playing true.")
	}
	if c.Beats < MinCountBeats || c.Beats > MaxCountBeats {
		return Invalid(fmt.Sprintf("A count-in is %d to %d beats.", MinCountBeats, MaxCountBeats))
	}
	if c.BPM < MinCountBPM || c.BPM > MaxCountBPM {
		return Invalid(fmt.Sprintf("A count-in's tempo is %d to %d beats a minute.", MinCountBPM, MaxCountBPM))
	}
	return nil
}

// Loop is an A-B loop: playback that passes EndMs from before it goes on from StartMs. The
// zero Loop is none.
type Loop struct {
	StartMs, EndMs int64
}

// Set reports whether l is a loop (not a clear).
func (l Loop) Set() bool { return l != Loop{} }

// CheckLoop validates a loop frame before the store checks it against the video's length.
func CheckLoop(l Loop) error {
	if !l.Set() {
		return nil
	}
	if err := CheckPosition(l.StartMs); err != nil {
		return err
	}
	if err := CheckPosition(l.EndMs); err != nil {
		return err
	}
	if l.EndMs <= l.StartMs {
		return Invalid(fmt.Sprintf("A loop must end after it starts: it starts at %s and ends at %s.", Clock(l.StartMs), Clock(l.EndMs)))
	}
	return nil
}

// LoopOutside is the error for a loop that ends past the video's end.
func LoopOutside(endMs, durationMs int64) error {
	return Invalid(fmt.Sprintf("A loop must lie within the video: it ends at %s but the video is %s long.", Clock(endMs), Clock(durationMs)))
}

// TooManyMarks is the error for a mark past the room's limit.
func TooManyMarks() error {
	return Invalid(fmt.Sprintf("A room holds at most %d marks; this one was not added.", MaxMarks))
}

// NoMarkAt is the error for a mark formation where the room has no mark.
func NoMarkAt(ms int64) error {
	return Invalid(fmt.Sprintf("There is no mark at %s: add a mark there first.", Clock(ms)))
}

// CheckDancers refuses a formation with more than MaxDancers dancers. A formation in another
// shape (the room's default may be any JSON) has none to count.
func CheckDancers(js []byte) error {
	var f struct {
		Dancers []json.RawMessage `json:"dancers"`
	}
	if json.Unmarshal(js, &f) != nil {
		return nil
	}
	if n := len(f.Dancers); n > MaxDancers {
		return Invalid(fmt.Sprintf("A formation holds at most %d dancers; this one has %d.", MaxDancers, n))
	}
	return nil
}

// CheckMarkFormation validates a mark's formation: null (clears it), or an object with a list
// of at most MaxDancers dancers, within the size limit.
func CheckMarkFormation(js []byte) error {
	if err := CheckFormation(js); err != nil {
		return err
	}
	if string(js) == "null" {
		return nil
	}
	var f struct {
		Dancers []json.RawMessage `json:"dancers"`
	}
	if json.Unmarshal(js, &f) != nil || f.Dancers == nil {
		return Invalid(`A mark's formation is null or {"grid": {"cols", "rows"}, "dancers": [...]}.`)
	}
	return CheckDancers(js)
}

// Clock renders ms as m:ss.t (h:mm:ss.t past an hour), as the pages show positions.
func Clock(ms int64) string {
	s, t := ms/1000, (ms%1000)/100
	if h := s / 3600; h > 0 {
		return fmt.Sprintf("%d:%02d:%02d.%d", h, s%3600/60, s%60, t)
	}
	return fmt.Sprintf("%d:%02d.%d", s/60, s%60, t)
}
