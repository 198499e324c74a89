package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/fencer-io/fencer/fsm/entry"
)

// Format names fencer's snapshot format in its header.
const Format = "fencer-snapshot"

// Snapshot format versions. Version 2 adds the grant history and the
// grants a restore voided; a state that has neither (its cluster never set
// the history's settings, nor was restored by a build that keeps one) is
// written as version 1, byte for byte as before, so that during a rolling
// upgrade the members still on an older build can install it. Version 3
// adds semaphore permits to the grant history (Header.PermitsFrom, grant
// records with a semaphore); a history without them is still version 2.
// Version 4 adds the members' keys (Header.MemberKeys, member records with
// a key): a build from before them would drop the keys it cannot decode
// (or refuse the records), so a state with any is written as version 4,
// which such a build refuses whole, and one without any as before.
// Version 5 adds sessions (Header.Sessions, session records, and the ids of
// the sessions that ended lately), and grants (locks, permits) under one.
// Version 6 adds issue 28's primitives: the live multi-grants
// (Header.MultiLocks, multi-lock records; their names' lock records are as
// before), and the revoked tokens remembered (Header.Revoked, revoked
// records) with grants ended "revoked" in the history, which only a state
// that remembers a revoke holds; and a lock's shared grants
// (Header.SharedLocks, shared_lock records; Header.SharedGrants counts the
// grant records of shared grants, whose mode a build before them would
// drop).
// Version 7 adds durable waiters (Header.DurableWaiters, durable_waiter
// records in log order per name) and the live grants durable waiters got
// (Header.Waited, waited records by token).
const (
	Version1 = 1
	Version2 = 2
	Version3 = 3
	Version4 = 4
	Version5 = 5
	Version6 = 6
	Version7 = 7
	// Version is the newest version this build writes and reads.
	Version = Version7
)

// Header is the first record of a snapshot. api/wire.SnapshotHeader repeats
// its version-1 fields for clients (snapshot save and restore answer with
// it): the contract imports nothing of fencer, and fsm nothing of HTTP, so
// neither can use the other's; wire's TestSnapshotHeaderMirrorsFSMHeader
// keeps them in step.
type Header struct {
	Format    string `json:"format"`
	Version   int    `json:"version"`
	ClusterID string `json:"cluster_id,omitempty"`
	Epoch     uint64 `json:"epoch"`
	// EpochFloor is the oldest epoch whose tokens a fenced write may carry,
	// set by a restore or forced recovery. Builds from before it refuse a
	// snapshot that has one (unknown field): they would accept those
	// writes, so they must stop rather than hold this state.
	EpochFloor   uint64 `json:"epoch_floor,omitempty"`
	LastToken    uint64 `json:"last_token"`
	AppliedIndex uint64 `json:"applied_index"`
	Term         uint64 `json:"term"`
	Locks        int    `json:"locks"`
	Keys         int    `json:"keys"`
	Members      int    `json:"members"`
	Requests     int    `json:"requests"`
	Delays       int    `json:"delays,omitempty"`
	Permits      int    `json:"permits,omitempty"`

	// Version 2: the grant history's settings (nil: the cluster keeps none
	// yet), the lowest token its ring accounts for, how many grant records
	// follow and how many of the newest are the ring (fsm/internal/grants); the
	// index of the restore or recovery that installed this state and how
	// many grants it voided there (Void).
	GrantHistory *entry.GrantHistorySettings `json:"grant_history,omitempty"`
	GrantsFrom   uint64                      `json:"grants_from,omitempty"`
	Grants       int                         `json:"grants,omitempty"`
	GrantRing    int                         `json:"grant_ring,omitempty"`
	RestoredAt   uint64                      `json:"restored_at,omitempty"`
	Voided       int                         `json:"voided,omitempty"`

	// Version 3: the lowest token from which the grant history records
	// semaphore permits (0: it records none; GrantHistorySettings.Permits),
	// and how many of the voided grants are permits.
	PermitsFrom   uint64 `json:"permits_from,omitempty"`
	VoidedPermits int    `json:"voided_permits,omitempty"`

	// Version 4: how many of the member records carry a key.
	MemberKeys int `json:"member_keys,omitempty"`

	// Version 5: how many live sessions, and ended session ids, follow.
	Sessions      int `json:"sessions,omitempty"`
	EndedSessions int `json:"ended_sessions,omitempty"`

	// Version 6: how many live multi-grants follow.
	MultiLocks int `json:"multi_locks,omitempty"`
	// Version 6: how many revoked tokens (grants' and sessions') follow.
	Revoked int `json:"revoked,omitempty"`
	// Version 6: how many shared grants of locks follow (shared_lock
	// records), and how many of the grant records are shared grants'.
	SharedLocks  int `json:"shared_locks,omitempty"`
	SharedGrants int `json:"shared_grants,omitempty"`

	// Version 7: how many durable waiters follow, and how many live grants
	// that durable waiters got.
	DurableWaiters int `json:"durable_waiters,omitempty"`
	Waited         int `json:"waited,omitempty"`
}

// Settings returns the grant history's settings as the state keeps them
// (Permits from PermitsFrom), false without any.
func (h *Header) Settings() (entry.GrantHistorySettings, bool) {
	if h.GrantHistory == nil {
		return entry.GrantHistorySettings{}, false
	}
	cfg := *h.GrantHistory
	cfg.Permits = h.PermitsFrom != 0
	return cfg, true
}

// needsVersion2 reports whether the header describes anything version 1
// cannot hold.
func (h *Header) needsVersion2() bool {
	return h.GrantHistory != nil || h.GrantsFrom != 0 || h.Grants != 0 || h.GrantRing != 0 || h.RestoredAt != 0 || h.Voided != 0
}

// needsVersion3 reports whether the header describes anything version 2
// cannot hold.
func (h *Header) needsVersion3() bool { return h.PermitsFrom != 0 || h.VoidedPermits != 0 }

// needsVersion4 reports whether the header describes anything version 3
// cannot hold.
func (h *Header) needsVersion4() bool { return h.MemberKeys != 0 }

// needsVersion5 reports whether the header describes anything version 4
// cannot hold. (A grant under a session exists only while its session
// lives.)
func (h *Header) needsVersion5() bool { return h.Sessions != 0 || h.EndedSessions != 0 }

// needsVersion6 reports whether the header describes anything version 5
// cannot hold: issue 28's records, one line per primitive.
func (h *Header) needsVersion6() bool {
	return h.MultiLocks != 0 ||
		h.Revoked != 0 ||
		h.SharedLocks != 0 || h.SharedGrants != 0
}

// needsVersion7 reports whether the header describes anything version 6
// cannot hold: durable waiters, and the grants they got.
func (h *Header) needsVersion7() bool { return h.DurableWaiters != 0 || h.Waited != 0 }

// Written is the header as a snapshot writes it: with the lowest version
// that holds its state.
func (h Header) Written() Header {
	h.Version = Version1
	switch {
	case h.needsVersion7():
		h.Version = Version7
	case h.needsVersion6():
		h.Version = Version6
	case h.needsVersion5():
		h.Version = Version5
	case h.needsVersion4():
		h.Version = Version4
	case h.needsVersion3():
		h.Version = Version3
	case h.needsVersion2():
		h.Version = Version2
	}
	return h
}

// Image is a decoded snapshot: the whole replicated state, sorted so that two
// replicas in the same state produce byte-identical snapshots.
type Image struct {
	Header   Header
	Locks    []entry.Lock
	Keys     []entry.FencedKey
	Members  []entry.Member
	Requests []entry.RequestRecord
	Delays   []entry.Delay
	Permits  []entry.Permit
	Voided   []entry.VoidedGrant
	// Sessions are the live sessions, sorted by id; EndedSessions the ids
	// of the sessions that ended lately, oldest first.
	Sessions      []entry.Session
	EndedSessions []uint64
	// MultiLocks are the live multi-grants, sorted by token.
	MultiLocks []entry.MultiLock
	// Revoked are the tokens of the grants and sessions revoked lately,
	// oldest first.
	Revoked []uint64
	// Shared are the locks' shared grants, by lock name then token, each
	// with Mode entry.ModeShared.
	Shared []entry.Lock
	// DurableWaiters are the durable waiters by kind (locks first) and
	// name, each name's in log order; Waited the live grants they got, by
	// token.
	DurableWaiters []entry.Waiter
	Waited         []entry.Waited
	// Grants is the grant history, in token order; the last
	// Header.GrantRing of them are the ring.
	Grants []entry.GrantRecord
}

// Record is one line of a snapshot after the header. Exactly one field is set.
type Record struct {
	Lock    *entry.Lock          `json:"lock,omitempty"`
	Key     *entry.FencedKey     `json:"key,omitempty"`
	Member  *entry.Member        `json:"member,omitempty"`
	Request *entry.RequestRecord `json:"request,omitempty"`
	Delay   *entry.Delay         `json:"delay,omitempty"`
	Permit  *entry.Permit        `json:"permit,omitempty"`
	Voided  *entry.VoidedGrant   `json:"voided,omitempty"`
	Grant   *entry.GrantRecord   `json:"grant,omitempty"`
	Session *entry.Session       `json:"session,omitempty"`
	// EndedSession is the id of a session that ended lately.
	EndedSession *uint64 `json:"ended_session,omitempty"`
	// MultiLock is a live multi-grant (version 6).
	MultiLock *entry.MultiLock `json:"multi_lock,omitempty"`
	// Revoked is the token of a grant or session revoked lately.
	Revoked *uint64 `json:"revoked,omitempty"`
	// SharedLock is one of a lock's shared grants.
	SharedLock *entry.Lock `json:"shared_lock,omitempty"`
	// DurableWaiter is a durable waiter (version 7); Waited a live grant
	// one got.
	DurableWaiter *entry.Waiter `json:"durable_waiter,omitempty"`
	Waited        *entry.Waited `json:"waited,omitempty"`
}

// WriteTo writes the image in snapshot format: a header line, then one JSON
// record per line.
func (img *Image) WriteTo(w io.Writer) (int64, error) {
	sw := NewWriter(w)
	sw.Encode(img.Header.Written())
	for i := range img.Locks {
		sw.Lock(&img.Locks[i])
	}
	for i := range img.Keys {
		sw.Encode(Record{Key: &img.Keys[i]})
	}
	sw.Middle(img)
	for i := range img.Grants {
		sw.Grant(&img.Grants[i])
	}
	return sw.Close()
}

// Middle writes img's records from its members to its voided grants, in
// the format's order: members, requests, delays, permits, voided grants,
// sessions, ended sessions, multi-grants, revoked tokens, shared grants of
// locks, durable waiters, the grants durable waiters got.
// Image.WriteTo, and fsm's View, which streams its locks, keys and grants
// from the state's own layout, write the rest around it.
func (sw *Writer) Middle(img *Image) {
	for i := range img.Members {
		sw.Encode(Record{Member: &img.Members[i]})
	}
	for i := range img.Requests {
		sw.Request(&img.Requests[i])
	}
	for i := range img.Delays {
		sw.Encode(Record{Delay: &img.Delays[i]})
	}
	for i := range img.Permits {
		sw.Encode(Record{Permit: &img.Permits[i]})
	}
	for i := range img.Voided {
		sw.Encode(Record{Voided: &img.Voided[i]})
	}
	for i := range img.Sessions {
		sw.Encode(Record{Session: &img.Sessions[i]})
	}
	for i := range img.EndedSessions {
		sw.Encode(Record{EndedSession: &img.EndedSessions[i]})
	}
	for i := range img.MultiLocks {
		sw.Encode(Record{MultiLock: &img.MultiLocks[i]})
	}
	for i := range img.Revoked {
		sw.Encode(Record{Revoked: &img.Revoked[i]})
	}
	for i := range img.Shared {
		sw.Encode(Record{SharedLock: &img.Shared[i]})
	}
	for i := range img.DurableWaiters {
		sw.Encode(Record{DurableWaiter: &img.DurableWaiters[i]})
	}
	for i := range img.Waited {
		sw.Encode(Record{Waited: &img.Waited[i]})
	}
}

// Writer encodes snapshot lines through a buffer; the first error
// stops it and is returned by close.
type Writer struct {
	bw   *bufio.Writer
	cw   *countingWriter
	enc  *json.Encoder
	line []byte // the fast paths' buffer
	err  error
}

func NewWriter(w io.Writer) *Writer {
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	return &Writer{bw: bw, cw: cw, enc: json.NewEncoder(bw)}
}

func (sw *Writer) Encode(v any) {
	if sw.err == nil {
		sw.err = sw.enc.Encode(v)
	}
}

// Lock writes a lock record: the bytes Encode(Record{Lock: l}) writes.
func (sw *Writer) Lock(l *entry.Lock) { writeLine(sw, l, appendLockRecord, Record{Lock: l}) }

// Request writes a request record: the bytes Encode(Record{Request: r})
// writes.
func (sw *Writer) Request(r *entry.RequestRecord) {
	writeLine(sw, r, appendRequestRecord, Record{Request: r})
}

// writeLine writes v's line by its fast path, appendLine, or as rec by
// encoding/json when that declines: the same bytes either way.
func writeLine[T any](sw *Writer, v *T, appendLine func([]byte, *T) ([]byte, bool), rec Record) {
	var ok bool
	if sw.line, ok = appendLine(sw.line[:0], v); ok {
		sw.write(sw.line)
		return
	}
	sw.Encode(rec)
}

func (sw *Writer) write(line []byte) {
	if sw.err == nil {
		_, sw.err = sw.bw.Write(line)
	}
}

func (sw *Writer) Close() (int64, error) {
	if sw.err == nil {
		sw.err = sw.bw.Flush()
	}
	return sw.cw.n, sw.err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ReadImage decodes a snapshot and checks that its counts match its header,
// so a truncated file is refused rather than restored as a smaller state.
func ReadImage(r io.Reader) (*Image, error) {
	img := &Image{}
	err := Decode(r, img, func(l *LockRecord) error {
		img.Locks = append(img.Locks, l.Lock())
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := img.CheckCounts(len(img.Locks)); err != nil {
		return nil, err
	}
	if err := img.Check(); err != nil {
		return nil, err
	}
	held := make(map[string]uint64, len(img.Locks))
	for _, l := range img.Locks {
		held[l.Name] = l.Token
	}
	for _, l := range img.Shared {
		if _, dup := held[l.Name]; dup {
			return nil, fmt.Errorf("snapshot is inconsistent: lock %q is held both exclusively and in shared mode", l.Name)
		}
	}
	if err := img.CheckHeldGrants(func(lock string) uint64 { return held[lock] }); err != nil {
		return nil, err
	}
	return img, nil
}

// Decode reads a snapshot: its header into img.Header, each lock record to
// lock (whose fields are valid only until it returns) in order, and every
// other record into img. It checks the header's format and version; the
// caller checks the rest (CheckLock, CheckCounts, Check). A restore decodes
// straight into its state this way, without an Image of a million locks in
// between. A snapshot is one JSON value per line, as Writer makes it; lock
// and request lines take the fast paths when they can.
//
// It is long because it is one read loop over the record kinds, a case each.
func Decode(r io.Reader, img *Image, lock func(*LockRecord) error) error {
	lr := lineReader{r: bufio.NewReaderSize(r, 256<<10)}
	line, err := lr.next()
	if err != nil {
		return fmt.Errorf("snapshot header: %w", err)
	}
	if err := decodeLine(line, &img.Header); err != nil {
		return fmt.Errorf("snapshot header: %w", err)
	}
	if img.Header.Format != Format {
		return fmt.Errorf("not a fencer snapshot (format %q)", img.Header.Format)
	}
	switch v := img.Header.Version; {
	case v == Version1 && img.Header.needsVersion2():
		return errors.New("snapshot version 1 with fields of version 2")
	case v < Version3 && img.Header.needsVersion3():
		return fmt.Errorf("snapshot version %d with fields of version 3", v)
	case v < Version4 && img.Header.needsVersion4():
		return fmt.Errorf("snapshot version %d with fields of version 4", v)
	case v < Version5 && img.Header.needsVersion5():
		return fmt.Errorf("snapshot version %d with fields of version 5", v)
	case v < Version6 && img.Header.needsVersion6():
		return fmt.Errorf("snapshot version %d with fields of version 6", v)
	case v < Version7 && img.Header.needsVersion7():
		return fmt.Errorf("snapshot version %d with fields of version 7", v)
	case v < Version1 || v > Version7:
		return fmt.Errorf("snapshot version %d is not supported (this build reads %d to %d)", v, Version1, Version7)
	}
	var lr0 LockRecord
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("snapshot record: %w", err)
		}
		if parseLockRecord(line, &lr0) {
			if err := lock(&lr0); err != nil {
				return err
			}
			continue
		}
		if r, ok := parseRequestRecord(line); ok {
			img.Requests = append(img.Requests, r)
			continue
		}
		var g entry.GrantRecord
		if parseGrantRecord(line, &g) {
			img.Grants = append(img.Grants, g)
			continue
		}
		var rec Record
		if err := decodeLine(line, &rec); err != nil {
			return fmt.Errorf("snapshot record: %w", err)
		}
		switch {
		case rec.Lock != nil:
			if err := lock(recordOf(rec.Lock)); err != nil {
				return err
			}
		case rec.Key != nil:
			img.Keys = append(img.Keys, *rec.Key)
		case rec.Member != nil:
			img.Members = append(img.Members, *rec.Member)
		case rec.Request != nil:
			img.Requests = append(img.Requests, *rec.Request)
		case rec.Delay != nil:
			img.Delays = append(img.Delays, *rec.Delay)
		case rec.Permit != nil:
			img.Permits = append(img.Permits, *rec.Permit)
		case rec.Voided != nil:
			img.Voided = append(img.Voided, *rec.Voided)
		case rec.Grant != nil:
			img.Grants = append(img.Grants, *rec.Grant)
		case rec.Session != nil:
			img.Sessions = append(img.Sessions, *rec.Session)
		case rec.EndedSession != nil:
			img.EndedSessions = append(img.EndedSessions, *rec.EndedSession)
		case rec.MultiLock != nil:
			img.MultiLocks = append(img.MultiLocks, *rec.MultiLock)
		case rec.Revoked != nil:
			img.Revoked = append(img.Revoked, *rec.Revoked)
		case rec.SharedLock != nil:
			img.Shared = append(img.Shared, *rec.SharedLock)
		case rec.DurableWaiter != nil:
			img.DurableWaiters = append(img.DurableWaiters, *rec.DurableWaiter)
		case rec.Waited != nil:
			img.Waited = append(img.Waited, *rec.Waited)
		default:
			return errors.New("snapshot record: empty record")
		}
	}
}

// decodeLine decodes one line holding exactly one JSON value, strictly.
func decodeLine(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more than one value on a line")
	}
	return nil
}

// lineReader returns a snapshot's lines, without their newline, skipping
// blank ones; a line is valid until the next call.
type lineReader struct {
	r    *bufio.Reader
	long []byte
}

func (lr *lineReader) next() ([]byte, error) {
	for {
		line, err := lr.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			lr.long = append(lr.long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = lr.r.ReadSlice('\n')
				lr.long = append(lr.long, line...)
			}
			line = lr.long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			return t, nil
		}
		if err != nil {
			return nil, err // io.EOF
		}
	}
}

// MemberKeys counts the member records that carry a key: a header's
// MemberKeys for those records.
func MemberKeys(members []entry.Member) int {
	n := 0
	for _, m := range members {
		if m.Key != "" {
			n++
		}
	}
	return n
}

// CheckCounts refuses a snapshot whose records are fewer or more than its
// header says; locks is how many lock records there were.
func (img *Image) CheckCounts(locks int) error {
	h := img.Header
	permits := 0
	for _, v := range img.Voided {
		if v.Semaphore != "" {
			permits++
		}
	}
	if permits != h.VoidedPermits {
		return fmt.Errorf("snapshot is incomplete: header says %d of the voided grants are permits, found %d", h.VoidedPermits, permits)
	}
	if keyed := MemberKeys(img.Members); keyed != h.MemberKeys {
		return fmt.Errorf("snapshot is inconsistent: header says %d member keys, the member records hold %d", h.MemberKeys, keyed)
	}
	if len(img.Shared) != h.SharedLocks || sharedGrants(img.Grants) != h.SharedGrants {
		return fmt.Errorf("snapshot is incomplete: header says %d shared grants of locks and %d shared grant records, found %d and %d",
			h.SharedLocks, h.SharedGrants, len(img.Shared), sharedGrants(img.Grants))
	}
	if len(img.Sessions) != h.Sessions || len(img.EndedSessions) != h.EndedSessions {
		return fmt.Errorf("snapshot is incomplete: header says %d sessions and %d ended, found %d and %d",
			h.Sessions, h.EndedSessions, len(img.Sessions), len(img.EndedSessions))
	}
	if len(img.MultiLocks) != h.MultiLocks {
		return fmt.Errorf("snapshot is incomplete: header says %d multi-grants, found %d", h.MultiLocks, len(img.MultiLocks))
	}
	if len(img.DurableWaiters) != h.DurableWaiters || len(img.Waited) != h.Waited {
		return fmt.Errorf("snapshot is incomplete: header says %d durable waiters and %d grants they got, found %d and %d",
			h.DurableWaiters, h.Waited, len(img.DurableWaiters), len(img.Waited))
	}
	if len(img.Revoked) != h.Revoked {
		return fmt.Errorf("snapshot is incomplete: header says %d revoked tokens, found %d", h.Revoked, len(img.Revoked))
	}
	if locks != h.Locks || len(img.Keys) != h.Keys || len(img.Members) != h.Members || len(img.Requests) != h.Requests || len(img.Delays) != h.Delays || len(img.Permits) != h.Permits ||
		len(img.Voided) != h.Voided || len(img.Grants) != h.Grants {
		return fmt.Errorf("snapshot is incomplete: header says %d locks, %d keys, %d members, %d requests, %d delays, %d permits, %d voided, %d grants; found %d, %d, %d, %d, %d, %d, %d, %d",
			h.Locks, h.Keys, h.Members, h.Requests, h.Delays, h.Permits, h.Voided, h.Grants, locks, len(img.Keys), len(img.Members), len(img.Requests), len(img.Delays), len(img.Permits), len(img.Voided), len(img.Grants))
	}
	return nil
}

// sharedGrants counts the grant records of shared grants.
func sharedGrants(grants []entry.GrantRecord) int {
	n := 0
	for _, g := range grants {
		if g.Mode != "" {
			n++
		}
	}
	return n
}

// Check refuses records that no log could have produced (see check), as
// "snapshot is inconsistent".
func (img *Image) Check() error {
	if err := img.check(); err != nil {
		return fmt.Errorf("snapshot is inconsistent: %w", err)
	}
	return nil
}

// CheckLock refuses a lock record that no log could have produced under
// this header: without a name, token or TTL, or a token above the last or
// of an epoch below the floor. (Duplicates are the caller's to find.)
func (h *Header) CheckLock(name string, token uint64, ttlMillis int64) error {
	if err := h.checkLock(name, token, ttlMillis); err != nil {
		return fmt.Errorf("snapshot is inconsistent: %w", err)
	}
	return nil
}

func (h *Header) checkLock(name string, token uint64, ttlMillis int64) error {
	if name == "" || token == 0 || ttlMillis <= 0 {
		return fmt.Errorf("lock %q with token %d and ttl %d ms", name, token, ttlMillis)
	}
	if token > h.LastToken {
		return fmt.Errorf("lock %q token %d exceeds last token %d", name, token, h.LastToken)
	}
	if entry.TokenEpoch(token) < h.EpochFloor {
		// Restore and recovery void every grant (locks and permits) when
		// they set the floor, so none is held with a token below it.
		return fmt.Errorf("lock %q token %d is of an epoch below the floor %d", name, token, h.EpochFloor)
	}
	return nil
}

// check refuses records that no log could have produced: duplicates, locks
// without a name, token or TTL, and tokens above the header's last token.
//
// It is long because it is a list of independent checks, one per kind of
// record, each a few lines.
func (img *Image) check() error {
	if img.Header.EpochFloor > img.Header.Epoch {
		return fmt.Errorf("epoch floor %d above epoch %d", img.Header.EpochFloor, img.Header.Epoch)
	}
	seen := map[[2]string]bool{}
	once := func(kind, id string) error {
		if seen[[2]string{kind, id}] {
			return fmt.Errorf("duplicate %s %q", kind, id)
		}
		seen[[2]string{kind, id}] = true
		return nil
	}
	for _, l := range img.Locks {
		if err := img.Header.checkLock(l.Name, l.Token, l.TTLMillis); err != nil {
			return err
		}
		if err := once("lock", l.Name); err != nil {
			return err
		}
	}
	for _, k := range img.Keys {
		if k.Key == "" || k.Token == 0 {
			return fmt.Errorf("key %q with token %d", k.Key, k.Token)
		}
		if err := once("key", k.Key); err != nil {
			return err
		}
	}
	for _, m := range img.Members {
		if err := once("member", m.ID); err != nil {
			return err
		}
	}
	for _, r := range img.Requests {
		if err := once("request", r.Key); err != nil {
			return err
		}
	}
	for _, d := range img.Delays {
		if d.Semaphore != "" {
			// A semaphore permit slot's delay.
			if d.Lock != "" || d.Millis <= 0 || d.Since == 0 || d.Limit < 1 {
				return fmt.Errorf("lock-delay of semaphore %q since %d for %d ms, limit %d", d.Semaphore, d.Since, d.Millis, d.Limit)
			}
			if err := once("slot delay", fmt.Sprintf("%s\x00%d", d.Semaphore, d.Since)); err != nil {
				return err
			}
			continue
		}
		if d.Lock == "" || d.Millis <= 0 {
			return fmt.Errorf("lock-delay of lock %q for %d ms", d.Lock, d.Millis)
		}
		if err := once("delay", d.Lock); err != nil {
			return err
		}
	}
	limits := map[string]int{}
	held := map[string]int{}
	for _, p := range img.Permits {
		if p.Semaphore == "" || p.Token == 0 || p.TTLMillis <= 0 || p.Limit < 1 || p.Token > img.Header.LastToken {
			return fmt.Errorf("permit %d of semaphore %q with ttl %d ms and limit %d", p.Token, p.Semaphore, p.TTLMillis, p.Limit)
		}
		if entry.TokenEpoch(p.Token) < img.Header.EpochFloor {
			return fmt.Errorf("permit %d of semaphore %q is of an epoch below the floor %d", p.Token, p.Semaphore, img.Header.EpochFloor)
		}
		if l, ok := limits[p.Semaphore]; ok && l != p.Limit {
			return fmt.Errorf("semaphore %q has permits of limits %d and %d", p.Semaphore, l, p.Limit)
		}
		limits[p.Semaphore] = p.Limit
		if held[p.Semaphore]++; held[p.Semaphore] > p.Limit {
			return fmt.Errorf("semaphore %q has more than its %d permits", p.Semaphore, p.Limit)
		}
		if err := once("permit", fmt.Sprint(p.Token)); err != nil {
			return err
		}
	}
	if err := img.checkSessions(); err != nil {
		return err
	}
	if err := img.checkMultiLocks(); err != nil {
		return err
	}
	if err := img.checkRevoked(); err != nil {
		return err
	}
	if err := img.checkShared(); err != nil {
		return err
	}
	if err := img.checkDurable(); err != nil {
		return err
	}
	return img.checkGrants()
}

// checkSessions refuses sessions no log could have written: without an id
// or a TTL, an id above the last token or of an epoch below the floor, a
// duplicate, an id both live and ended, and a lock or permit under a
// session that is not live.
func (img *Image) checkSessions() error {
	live := map[uint64]bool{}
	for _, s := range img.Sessions {
		if s.ID == 0 || s.TTLMillis <= 0 || s.ID > img.Header.LastToken || entry.TokenEpoch(s.ID) < img.Header.EpochFloor {
			return fmt.Errorf("session %d with ttl %d ms", s.ID, s.TTLMillis)
		}
		if live[s.ID] {
			return fmt.Errorf("duplicate session %d", s.ID)
		}
		live[s.ID] = true
	}
	ended := map[uint64]bool{}
	for _, id := range img.EndedSessions {
		if id == 0 || live[id] || ended[id] || id > img.Header.LastToken {
			return fmt.Errorf("ended session %d is live, a duplicate or above the last token", id)
		}
		ended[id] = true
	}
	for _, l := range img.Locks {
		if l.Session != 0 && !live[l.Session] {
			return fmt.Errorf("lock %q held under session %d, which is not live", l.Name, l.Session)
		}
	}
	for _, p := range img.Permits {
		if p.Session != 0 && !live[p.Session] {
			return fmt.Errorf("permit %d of semaphore %q held under session %d, which is not live", p.Token, p.Semaphore, p.Session)
		}
	}
	return nil
}

// checkMultiLocks refuses multi-grants no log could have written: token 0
// or above the last token, no names or more than entry.MaxMultiNames, a
// name twice (in one grant or in two), a token twice, or out of order.
// That each name's lock carries the token is checked where the locks are
// (fsm's restore streams them).
func (img *Image) checkMultiLocks() error {
	names := map[string]bool{}
	var last uint64
	for _, m := range img.MultiLocks {
		if m.Token == 0 || m.Token <= last || m.Token > img.Header.LastToken || len(m.Names) == 0 || len(m.Names) > entry.MaxMultiNames {
			return fmt.Errorf("multi-grant %d of %d names (after %d, last token %d)", m.Token, len(m.Names), last, img.Header.LastToken)
		}
		last = m.Token
		for _, n := range m.Names {
			if n == "" || names[n] {
				return fmt.Errorf("multi-grant %d names lock %q, empty or held twice", m.Token, n)
			}
			names[n] = true
		}
	}
	return nil
}

// checkRevoked refuses revoked tokens no log could have written: 0, above
// the last token, a duplicate, or a grant or session still live (a revoke
// ends what it names, and a token is never granted twice).
func (img *Image) checkRevoked() error {
	live := map[uint64]bool{}
	for _, l := range img.Locks {
		live[l.Token] = true
	}
	for _, p := range img.Permits {
		live[p.Token] = true
	}
	for _, s := range img.Sessions {
		live[s.ID] = true
	}
	for _, m := range img.MultiLocks {
		// One name of it revoked at a time by a leader of an older build,
		// the others still held (fsm's restoreMultis).
		delete(live, m.Token)
	}
	seen := map[uint64]bool{}
	for _, t := range img.Revoked {
		if t == 0 || t > img.Header.LastToken || seen[t] || live[t] {
			return fmt.Errorf("revoked token %d is 0, above the last token, a duplicate or still live", t)
		}
		seen[t] = true
	}
	return nil
}
