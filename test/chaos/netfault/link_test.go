package netfault

import (
	"runtime"
	"testing"
	"time"
)

func TestLinkForwards(t *testing.T) {
	srv := newLineServer(t, "b")
	l := newTestLink(t, srv.addr())

	c := dial(t, l.Addr())
	mustAsk(t, c, "ping", "b:ping")
	mustAsk(t, c, "again", "b:again")

	// A pump counts bytes once its write returns, which can be just after
	// the reader has them.
	want := [2]int64{int64(len("ping\nagain\n")), int64(len("b:ping\nb:again\n"))}
	waitFor(t, "the byte counts", func() bool { return l.Stats().Bytes == want })
	st := l.Stats()
	if st.Accepted != 1 || st.Active != 1 {
		t.Errorf("Accepted %d, Active %d; want 1, 1", st.Accepted, st.Active)
	}
}

func TestLinkPassesHalfClose(t *testing.T) {
	addr, accepted := holdServer(t)
	l := newTestLink(t, addr)
	c := dial(t, l.Addr())
	srv := nextConn(t, accepted)

	writeAll(t, c.conn, "bye")
	if err := c.conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	readExactly(t, srv, "bye")
	mustBreak(t, srv) // EOF, passed on by the link

	writeAll(t, srv, "still here")
	readExactly(t, c.conn, "still here")
	_ = srv.Close()
	waitFor(t, "the finished pipe to be released", func() bool { return l.Stats().Active == 0 })
}

func TestCutResetsOpenConnection(t *testing.T) {
	srv := newLineServer(t, "b")
	l := newTestLink(t, srv.addr())
	c := dial(t, l.Addr())
	mustAsk(t, c, "ping", "b:ping")

	l.Cut()

	mustBreak(t, c.conn)
	waitFor(t, "the cut pipe to be released", func() bool { return l.Stats().Active == 0 })
}

func TestCutRejectsNewConnections(t *testing.T) {
	srv := newLineServer(t, "b")
	l := newTestLink(t, srv.addr())
	l.Cut()

	mustBeRefused(t, l.Addr())
	if st := l.Stats(); st.Rejected != 1 || st.Accepted != 0 {
		t.Errorf("Rejected %d, Accepted %d; want 1, 0", st.Rejected, st.Accepted)
	}
}

func TestHealAdmitsNewConnectionsOnly(t *testing.T) {
	srv := newLineServer(t, "b")
	l := newTestLink(t, srv.addr())
	old := dial(t, l.Addr())
	mustAsk(t, old, "ping", "b:ping")

	l.Cut()
	mustBreak(t, old.conn)
	l.Heal()

	mustAsk(t, dial(t, l.Addr()), "ping", "b:ping")
	if _, err := old.ask("ping"); err == nil {
		t.Fatal("a connection reset by Cut came back after Heal")
	}
}

func TestCutOneWayForwardDropsRequests(t *testing.T) {
	addr, accepted := holdServer(t)
	l := newTestLink(t, addr)
	c := dial(t, l.Addr())
	srv := nextConn(t, accepted)

	l.CutOneWay(Forward)
	writeAll(t, c.conn, "lost")
	waitFor(t, "the forward bytes to be dropped", func() bool { return l.Stats().Dropped[Forward] == 4 })
	mustStaySilent(t, srv)

	writeAll(t, srv, "reply")
	readExactly(t, c.conn, "reply")
	if st := l.Stats(); st.Bytes[Forward] != 0 || st.Dropped[Backward] != 0 {
		t.Errorf("Bytes[Forward] %d, Dropped[Backward] %d; want 0, 0", st.Bytes[Forward], st.Dropped[Backward])
	}

	// The stream has lost bytes, so Heal must end it rather than resume it.
	l.Heal()
	mustBreak(t, c.conn)
	other := dial(t, l.Addr())
	srv2 := nextConn(t, accepted)
	writeAll(t, other.conn, "fine")
	readExactly(t, srv2, "fine")
}

func TestCutOneWayBackwardDropsReplies(t *testing.T) {
	addr, accepted := holdServer(t)
	l := newTestLink(t, addr)
	c := dial(t, l.Addr())
	srv := nextConn(t, accepted)

	l.CutOneWay(Backward)
	writeAll(t, srv, "lost")
	waitFor(t, "the backward bytes to be dropped", func() bool { return l.Stats().Dropped[Backward] == 4 })
	mustStaySilent(t, c.conn)

	writeAll(t, c.conn, "request")
	readExactly(t, srv, "request")
	if st := l.Stats(); st.Bytes[Backward] != 0 || st.Dropped[Forward] != 0 {
		t.Errorf("Bytes[Backward] %d, Dropped[Forward] %d; want 0, 0", st.Bytes[Backward], st.Dropped[Forward])
	}
}

func TestDelayAppliesToOpenConnection(t *testing.T) {
	srv := newLineServer(t, "b")
	l := newTestLink(t, srv.addr())
	c := dial(t, l.Addr())
	mustAsk(t, c, "warm", "b:warm")

	const d = 100 * time.Millisecond
	l.Delay(d)

	start := time.Now()
	mustAsk(t, c, "ping", "b:ping")
	// The request and the reply are each held for d. Only a lower bound:
	// a busy machine can always be slower.
	if rtt := time.Since(start); rtt < 2*d {
		t.Errorf("round trip took %v, want at least %v", rtt, 2*d)
	}
}

func TestDelayKeepsOrder(t *testing.T) {
	addr, accepted := holdServer(t)
	l := newTestLink(t, addr)
	c := dial(t, l.Addr())
	srv := nextConn(t, accepted)

	l.Delay(20 * time.Millisecond)
	want := ""
	for _, s := range []string{"a", "b", "c", "d", "e"} {
		writeAll(t, c.conn, s)
		want += s
		// Shrinking the delay must not let a later chunk overtake an
		// earlier one.
		l.Delay(0)
	}
	readExactly(t, srv, want)
}

func TestCloseReleasesEverything(t *testing.T) {
	srv := newLineServer(t, "b")
	before := runtime.NumGoroutine()

	l, err := NewLink("test", srv.addr())
	if err != nil {
		t.Fatal(err)
	}
	var clients []*client
	for range 3 {
		c := dial(t, l.Addr())
		mustAsk(t, c, "ping", "b:ping")
		clients = append(clients, c)
	}
	// Leave a chunk waiting in a delay queue and a one-way cut in force, so
	// Close has to interrupt a sleeping writer too.
	l.Delay(time.Hour)
	writeAll(t, clients[0].conn, "stuck\n")
	l.CutOneWay(Backward)

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	if st := l.Stats(); st.Active != 0 {
		t.Errorf("Active = %d after Close, want 0", st.Active)
	}
	for _, c := range clients {
		mustBreak(t, c.conn)
	}
	waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}
