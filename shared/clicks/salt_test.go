package clicks

import (
	"testing"
	"time"
)

func TestSaltKeyAndWindow(t *testing.T) {
	day := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	if k := SaltKey(day.Add(23*time.Hour + 59*time.Minute).In(time.FixedZone("x", 5*3600))); k != "2030-01-02" {
		t.Fatalf("SaltKey = %q; want the UTC date 2030-01-02", k)
	}
	if d, err := SaltDay("2030-01-02"); err != nil || !d.Equal(day) {
		t.Fatalf("SaltDay = %v, %v", d, err)
	}
	for _, bad := range []string{"", "2030-1-2", "2030-01-02T00:00:00Z", "../x"} {
		if _, err := SaltDay(bad); err == nil {
			t.Errorf("SaltDay(%q) succeeded", bad)
		}
	}
	for _, tt := range []struct {
		now  time.Time
		want bool
	}{
		{day.Add(-SaltAhead - time.Nanosecond), false},
		{day.Add(-SaltAhead), true},
		{day.Add(12 * time.Hour), true},
		{day.Add(24*time.Hour + SaltGrace - time.Nanosecond), true},
		{day.Add(24*time.Hour + SaltGrace), false},
	} {
		if got := SaltWanted(day, tt.now); got != tt.want {
			t.Errorf("SaltWanted(%v, %v) = %v; want %v", day, tt.now, got, tt.want)
		}
	}
	if c := SaltStreamConfig(); c.MaxAge < SaltAhead+24*time.Hour+SaltGrace {
		t.Fatalf("bucket MaxAge %v would delete a salt while it is still wanted", c.MaxAge)
	}
}
