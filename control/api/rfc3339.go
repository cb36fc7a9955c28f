package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/edgelink/edgelink/shared/link"
)

// parseTime reads the value of field name as an RFC 3339 date-time (5.6):
// T and Z in either case, any offset from -23:59 to +23:59, a fraction of
// any length, and a leap second 23:59:60 UTC, taken as the next second as
// PostgreSQL does. PostgreSQL stores microseconds, so digits below the
// microsecond must be zeros: a time that would be cut is refused, never
// cut. Go's time.Parse alone would refuse the lower-case letters and the
// leap second, and take a comma for the fraction and +24:00, which RFC 3339
// does not allow. An error wraps link.ErrInvalidInput and names the field.
func parseTime(name, s string) (time.Time, error) {
	norm, frac, leap, ok := rfc3339Shape(s)
	if !ok {
		return time.Time{}, fmt.Errorf("%w: %s must be an RFC 3339 time such as 2030-01-02T15:04:05Z or 2030-01-02T17:04:05.5+02:00, not %.40q", link.ErrInvalidInput, name, s)
	}
	if len(frac) > 6 {
		if strings.Trim(frac[6:], "0") != "" {
			return time.Time{}, fmt.Errorf("%w: %s has digits below the microsecond, and times are stored in microseconds: send at most 6 fractional digits", link.ErrInvalidInput, name)
		}
		norm = strings.Replace(norm, "."+frac, "."+frac[:6], 1)
	}
	t, err := time.Parse(time.RFC3339Nano, norm)
	if err != nil {
		// The shape is right, so a field is out of its calendar range.
		return time.Time{}, fmt.Errorf("%w: %s names no such day: %.10s", link.ErrInvalidInput, name, s)
	}
	if leap {
		if u := t.UTC(); u.Hour() != 23 || u.Minute() != 59 || u.Second() != 59 {
			return time.Time{}, fmt.Errorf("%w: %s has second 60, which is only a leap second, at 23:59:60 UTC", link.ErrInvalidInput, name)
		}
		t = t.Add(time.Second)
	}
	return t, nil
}

// rfc3339Shape checks s against RFC 3339's date-time grammar and the
// ranges of hours, minutes and seconds, and returns it with upper-case T
// and Z, the fraction's digits, and whether the second was 60 (then given
// as 59).
func rfc3339Shape(s string) (norm, frac string, leap, ok bool) {
	b := []byte(s)
	digits := func(i, n int, max int) bool {
		if i+n > len(b) {
			return false
		}
		v := 0
		for _, c := range b[i : i+n] {
			if c < '0' || c > '9' {
				return false
			}
			v = v*10 + int(c-'0')
		}
		return v <= max
	}
	at := func(i int, cs string) bool { return i < len(b) && strings.IndexByte(cs, b[i]) >= 0 }
	if !digits(0, 4, 9999) || !at(4, "-") || !digits(5, 2, 12) || !at(7, "-") || !digits(8, 2, 31) ||
		!at(10, "Tt") || !digits(11, 2, 23) || !at(13, ":") || !digits(14, 2, 59) || !at(16, ":") || !digits(17, 2, 60) {
		return "", "", false, false
	}
	b[10] = 'T'
	if b[17] == '6' {
		leap, b[17], b[18] = true, '5', '9'
	}
	i := 19
	if at(i, ".") {
		j := i + 1
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		if j == i+1 {
			return "", "", false, false
		}
		frac, i = string(b[i+1:j]), j
	}
	switch {
	case at(i, "Zz") && i+1 == len(b):
		b[i] = 'Z'
	case at(i, "+-") && i+6 == len(b) && digits(i+1, 2, 23) && at(i+3, ":") && digits(i+4, 2, 59):
	default:
		return "", "", false, false
	}
	return string(b), frac, leap, true
}
