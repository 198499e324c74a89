package fence

import (
	"errors"
	"testing"
)

func TestParseToken(t *testing.T) {
	valid := map[string]uint64{
		"1":                    1,
		"42":                   42,
		"18446744073709551615": 1<<64 - 1,
	}
	for s, want := range valid {
		got, err := ParseToken(s)
		if err != nil || got != want {
			t.Errorf("ParseToken(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	invalid := []string{
		"", "0", "00", "01", "+1", "-1", " 1", "1 ", "1.0", "0x1f", "1e3",
		"18446744073709551616", "99999999999999999999", "١",
	}
	for _, s := range invalid {
		got, err := ParseToken(s)
		if !errors.Is(err, ErrMissingToken) {
			t.Errorf("ParseToken(%q) = %d, %v; want ErrMissingToken", s, got, err)
		}
		if Code(err) != "missing_token" {
			t.Errorf("Code(ParseToken(%q)) = %q", s, Code(err))
		}
	}
}

func TestParseSequence(t *testing.T) {
	if n, err := ParseSequence("3"); err != nil || n != 3 {
		t.Fatalf("ParseSequence(3) = %d, %v", n, err)
	}
	for _, s := range []string{"", "0", "-1", "x"} {
		if _, err := ParseSequence(s); !errors.Is(err, ErrMalformedSequence) {
			t.Errorf("ParseSequence(%q) err = %v", s, err)
		}
	}
}

func TestMarkAdmits(t *testing.T) {
	cases := []struct {
		mark       Mark
		token, seq uint64
		want       bool
	}{
		{Mark{}, 0, 0, false},
		{Mark{}, 0, 1, false},
		{Mark{}, 1, 0, true},
		{Mark{Token: 5}, 4, 0, false},
		{Mark{Token: 5}, 5, 0, false}, // replay
		{Mark{Token: 5}, 6, 0, true},
		{Mark{Token: 5}, 5, 1, true}, // numbered write under the same grant
		{Mark{Token: 5, Seq: 2}, 5, 2, false},
		{Mark{Token: 5, Seq: 2}, 5, 1, false},
		{Mark{Token: 5, Seq: 2}, 5, 3, true},
		{Mark{Token: 5, Seq: 2}, 5, 0, false},
		{Mark{Token: 5, Seq: 2}, 4, 9, false},
		{Mark{Token: 5, Seq: 2}, 6, 0, true},
	}
	for _, c := range cases {
		if got := c.mark.Admits(c.token, c.seq); got != c.want {
			t.Errorf("%+v.Admits(%d, %d) = %v, want %v", c.mark, c.token, c.seq, got, c.want)
		}
	}
}

func TestStaleErrorIs(t *testing.T) {
	var err error = &StaleError{Key: "k", Token: 3, HighWater: 4}
	if !errors.Is(err, ErrStaleToken) || errors.Is(err, ErrMissingToken) {
		t.Fatalf("errors.Is mismatch for %v", err)
	}
	var se *StaleError
	if !errors.As(errors.Join(errors.New("ctx"), err), &se) || se.HighWater != 4 {
		t.Fatalf("errors.As failed")
	}
}
