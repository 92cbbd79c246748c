package domain

import (
	"errors"
	"testing"
	"time"
)

func TestExpireIsIdempotent(t *testing.T) {
	t.Parallel()
	r := New("hold-1", time.UnixMilli(1000), 5*time.Second)
	if r.Expire(time.UnixMilli(5999)) {
		t.Fatalf("Expire(5999) before expiresAt=%d changed the hold", r.ExpiresAt)
	}
	if !r.Expire(time.UnixMilli(6000)) {
		t.Fatalf("Expire(6000) at expiresAt did not change the hold")
	}
	if r.Expire(time.UnixMilli(7000)) {
		t.Fatalf("second Expire changed the hold again")
	}
	if r.ExpirationCount != 1 || r.Status != Expired || r.ExpiredAt != 6000 || r.AlarmAt != 0 {
		t.Fatalf("after expiry = %+v, want expired once at 6000 with no alarm", r)
	}
}

func TestSettle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		from    Status
		to      Status
		nowMs   int64
		want    Status
		wantErr error
	}{
		{"confirm held", Held, Confirmed, 2000, Confirmed, nil},
		{"release held", Held, Released, 2000, Released, nil},
		{"confirm confirmed again", Confirmed, Confirmed, 2000, Confirmed, nil},
		{"release confirmed", Confirmed, Released, 2000, Confirmed, ErrConflict},
		{"confirm released", Released, Confirmed, 2000, Released, ErrConflict},
		{"confirm past expiry", Held, Confirmed, 99_000, Expired, ErrConflict},
		{"confirm missing", Missing, Confirmed, 2000, Missing, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := New("hold-1", time.UnixMilli(1000), 5*time.Second)
			r.Status = tt.from
			err := r.Settle(tt.to, time.UnixMilli(tt.nowMs))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Settle(%s) error = %v, want %v", tt.to, err, tt.wantErr)
			}
			if r.Status != tt.want {
				t.Fatalf("Settle(%s) status = %s, want %s", tt.to, r.Status, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"abc", "a-b", "0123456789012345678901234567890123456789"} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range []string{"", "ab", "Abc", "-ab", "ab-", "a_b", "01234567890123456789012345678901234567890", "a b"} {
		if err := ValidateID(id); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalid", id, err)
		}
	}
	for ttl, ok := range map[int64]bool{4: false, 5: true, 3600: true, 3601: false, 0: false, -5: false} {
		if err := ValidateTTL(ttl); (err == nil) != ok {
			t.Errorf("ValidateTTL(%d) = %v, want ok=%v", ttl, err, ok)
		}
	}
	// now is a safe integer of at least 1: 1e17 and 2^53+1 (which a JSON number cannot hold
	// exactly) are refused, not stored rounded.
	for now, ok := range map[int64]bool{1: true, 1<<53 - 1: true, 0: false, -1: false, 1<<53 + 1: false, 1e17: false} {
		if err := ValidateNow(now); (err == nil) != ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("ValidateNow(%d) = %v, want ok=%v", now, err, ok)
		}
	}
}
