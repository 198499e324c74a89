package fence

import (
	"errors"
	"path/filepath"
	"testing"
)

func openTestStore(t *testing.T, opts *Options) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "fence.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// put writes value under key, fenced on key.
func put(s *Store, key string, token, seq uint64, value string) error {
	return s.UpdateSeq(key, token, seq, func(tx *Tx) error {
		return tx.Put(key, []byte(value))
	})
}

func get(t *testing.T, s *Store, key string) string {
	t.Helper()
	var v []byte
	if err := s.View(func(tx *Tx) error { v = tx.Get(key); return nil }); err != nil {
		t.Fatal(err)
	}
	return string(v)
}

func mustHighWater(t *testing.T, s *Store, key string) Mark {
	t.Helper()
	m, err := s.HighWater(key)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestUpdateRefusesStaleEqualAndMissing(t *testing.T) {
	s := openTestStore(t, nil)
	if err := put(s, "k", 6, 0, "six"); err != nil {
		t.Fatal(err)
	}

	for _, token := range []uint64{5, 6} {
		called := false
		err := s.Update("k", token, func(tx *Tx) error { called = true; return tx.Put("k", []byte("bad")) })
		var se *StaleError
		if !errors.Is(err, ErrStaleToken) || !errors.As(err, &se) {
			t.Fatalf("token %d: err = %v, want stale", token, err)
		}
		if se.HighWater != 6 || se.Token != token || se.Key != "k" {
			t.Errorf("token %d: StaleError = %+v", token, se)
		}
		if called {
			t.Errorf("token %d: fn ran for a stale write", token)
		}
	}
	if err := s.Update("k", 0, func(*Tx) error { t.Fatal("fn ran for token 0"); return nil }); !errors.Is(err, ErrMissingToken) {
		t.Fatalf("token 0: err = %v, want ErrMissingToken", err)
	}
	if err := put(s, "", 7, 0, "x"); !errors.Is(err, ErrEmptyKey) {
		t.Fatalf("empty key: err = %v", err)
	}

	if got := get(t, s, "k"); got != "six" {
		t.Fatalf("value = %q, want six", got)
	}
	if err := put(s, "k", 7, 0, "seven"); err != nil {
		t.Fatal(err)
	}
	if got, m := get(t, s, "k"), mustHighWater(t, s, "k"); got != "seven" || m != (Mark{Token: 7}) {
		t.Fatalf("after 7: value %q mark %+v", got, m)
	}
}

func TestFnErrorLeavesNothingChanged(t *testing.T) {
	s := openTestStore(t, nil)
	if err := put(s, "k", 3, 0, "three"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := s.Update("k", 9, func(tx *Tx) error {
		if err := tx.Put("k", []byte("nine")); err != nil {
			return err
		}
		if err := tx.Put("other", []byte("x")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if got := get(t, s, "k"); got != "three" {
		t.Errorf("value = %q, want three", got)
	}
	if got := get(t, s, "other"); got != "" {
		t.Errorf("other = %q, want absent", got)
	}
	if m := mustHighWater(t, s, "k"); m != (Mark{Token: 3}) {
		t.Errorf("mark = %+v, want token 3", m)
	}
	// The refused attempt did not burn token 9.
	if err := put(s, "k", 9, 0, "nine"); err != nil {
		t.Fatal(err)
	}
}

func TestHighWaterSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := put(s, "k", 34, 0, "v34"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if m := mustHighWater(t, s, "k"); m != (Mark{Token: 34}) {
		t.Fatalf("mark after reopen = %+v", m)
	}
	if err := put(s, "k", 33, 0, "v33"); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("token 33 after reopen: err = %v, want stale", err)
	}
	if got := get(t, s, "k"); got != "v34" {
		t.Fatalf("value = %q", got)
	}
}

func TestSequenceUnderOneGrant(t *testing.T) {
	s := openTestStore(t, nil)
	steps := []struct {
		token, seq uint64
		ok         bool
	}{
		{5, 1, true},
		{5, 2, true},
		{5, 2, false}, // replay of seq 2
		{5, 1, false}, // older write of the same grant
		{5, 0, false}, // no sequence: equal token is a replay
		{5, 3, true},
		{4, 9, false}, // older grant, whatever its sequence
		{6, 0, true},  // newer grant
		{6, 0, false},
		{6, 1, true}, // numbering may start after an unnumbered write
	}
	for i, st := range steps {
		err := put(s, "k", st.token, st.seq, "v")
		if st.ok && err != nil {
			t.Fatalf("step %d (%d/%d): %v", i, st.token, st.seq, err)
		}
		if !st.ok && !errors.Is(err, ErrStaleToken) {
			t.Fatalf("step %d (%d/%d): err = %v, want stale", i, st.token, st.seq, err)
		}
	}
	if m := mustHighWater(t, s, "k"); m != (Mark{Token: 6, Seq: 1}) {
		t.Fatalf("mark = %+v", m)
	}
}

func TestPerKeyAndStoreWideScopes(t *testing.T) {
	perKey := openTestStore(t, nil)
	if err := put(perKey, "a", 10, 0, "a"); err != nil {
		t.Fatal(err)
	}
	if err := put(perKey, "b", 3, 0, "b"); err != nil {
		t.Fatalf("per-key: b with a lower token than a: %v", err)
	}

	wide := openTestStore(t, &Options{StoreWide: true})
	if err := put(wide, "a", 10, 0, "a"); err != nil {
		t.Fatal(err)
	}
	if err := put(wide, "b", 3, 0, "b"); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("store-wide: b with token 3 after 10: err = %v, want stale", err)
	}
	if m := mustHighWater(t, wide, "anything"); m.Token != 10 {
		t.Fatalf("store-wide mark = %+v", m)
	}
}

func TestViewIsReadOnly(t *testing.T) {
	s := openTestStore(t, nil)
	err := s.View(func(tx *Tx) error { return tx.Put("k", []byte("v")) })
	if err == nil {
		t.Fatal("Put in View succeeded")
	}
}

func TestOpenValidates(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "x.db"), &Options{OpenTimeout: -1}); err == nil {
		t.Fatal("negative OpenTimeout accepted")
	}
}

func TestScopeModeIsFixedAtCreation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fence.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := put(s, "k", 9, 0, "v"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopening store-wide would start a fresh mark at 0 and take token 1.
	if s, err := Open(path, &Options{StoreWide: true}); err == nil {
		_ = s.Close()
		t.Fatal("per-key store reopened store-wide")
	}
	s, err = Open(path, nil)
	if err != nil {
		t.Fatalf("reopen per-key: %v", err)
	}
	_ = s.Close()
}
