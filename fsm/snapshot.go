package fsm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/fsm/entry"
)

// SnapshotFormat names fencer's snapshot format in its header.
const SnapshotFormat = "fencer-snapshot"

// SnapshotVersion is the current snapshot format version.
const SnapshotVersion = 1

// Header is the first record of a snapshot.
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
}

// Image is a decoded snapshot: the whole replicated state, sorted so that two
// replicas in the same state produce byte-identical snapshots.
type Image struct {
	Header   Header
	Locks    []Lock
	Keys     []FencedKey
	Members  []entry.Member
	Requests []requestRecord
	Delays   []Delay
	Permits  []Permit
}

// record is one line of a snapshot after the header. Exactly one field is set.
type record struct {
	Lock    *Lock          `json:"lock,omitempty"`
	Key     *FencedKey     `json:"key,omitempty"`
	Member  *entry.Member  `json:"member,omitempty"`
	Request *requestRecord `json:"request,omitempty"`
	Delay   *Delay         `json:"delay,omitempty"`
	Permit  *Permit        `json:"permit,omitempty"`
}

// View is a consistent, read-only capture of the state, taken in time
// proportional to the number of locks and keys but without copying them:
// locks and keys are immutable once stored, so the view keeps pointers to
// them, and the request table is append-only, so the view keeps its slice.
// Writing a view streams it record by record, so a snapshot never holds a
// second copy of the state nor its encoding in memory.
type View struct {
	Header   Header
	locks    []*lockEntry   // sorted by name (sorted outside the FSM's lock)
	keys     []*FencedKey   // sorted by key
	members  []entry.Member // sorted by id
	requests []requestRecord
	delays   []Delay  // sorted by lock
	permits  []Permit // sorted by semaphore and token
}

// View captures the state; see View.
func (f *FSM) View() *View {
	f.mu.RLock()
	v := f.viewLocked()
	f.mu.RUnlock()
	sortEntries(v.locks)
	slices.SortFunc(v.keys, func(a, b *FencedKey) int { return strings.Compare(a.Key, b.Key) })
	return v
}

// viewLocked takes the pointers; View sorts them after releasing the lock.
func (f *FSM) viewLocked() *View {
	s := f.s
	v := &View{Header: Header{
		Format:       SnapshotFormat,
		Version:      SnapshotVersion,
		ClusterID:    s.clusterID,
		Epoch:        s.epoch,
		EpochFloor:   s.floor,
		LastToken:    s.lastToken,
		AppliedIndex: f.applied,
		Term:         f.term,
		Locks:        len(s.locks),
		Keys:         len(s.keys),
		Members:      len(s.members),
		Requests:     len(s.reqOrder),
		Delays:       len(s.delays),
	}}
	v.locks = make([]*lockEntry, 0, len(s.locks))
	for _, e := range s.locks {
		v.locks = append(v.locks, e)
	}
	v.keys = make([]*FencedKey, 0, len(s.keys))
	for _, k := range s.keys {
		v.keys = append(v.keys, k)
	}
	v.members = make([]entry.Member, 0, len(s.members))
	for _, id := range sortedKeys(s.members) {
		v.members = append(v.members, s.members[id])
	}
	// Log order, as eviction order must survive. The full slice expression
	// keeps a later append from ever writing into what the view shares.
	v.requests = s.reqOrder[:len(s.reqOrder):len(s.reqOrder)]
	for _, name := range sortedKeys(s.delays) {
		v.delays = append(v.delays, s.delays[name])
	}
	// Copied: permits are few next to locks (a semaphore's limit bounds
	// them), and copying keeps the view simple.
	v.permits = s.permitList()
	v.Header.Permits = len(v.permits)
	return v
}

// Image returns a copy of the view's state.
func (v *View) Image() *Image {
	img := &Image{Header: v.Header}
	if len(v.locks) > 0 {
		img.Locks = make([]Lock, len(v.locks))
		for i, e := range v.locks {
			img.Locks[i] = e.lock()
		}
	}
	for _, k := range v.keys {
		img.Keys = append(img.Keys, *k)
	}
	if len(v.members) > 0 {
		img.Members = slices.Clone(v.members)
	}
	if len(v.requests) > 0 {
		img.Requests = slices.Clone(v.requests)
	}
	img.Delays = slices.Clone(v.delays)
	img.Permits = slices.Clone(v.permits)
	return img
}

// WriteTo writes the view in snapshot format, the same bytes as its Image's
// WriteTo, one record at a time.
func (v *View) WriteTo(w io.Writer) (int64, error) {
	sw := newSnapshotWriter(w)
	sw.encode(v.Header)
	for _, e := range v.locks {
		l := e.lock()
		sw.encode(record{Lock: &l})
	}
	for _, k := range v.keys {
		sw.encode(record{Key: k})
	}
	for i := range v.members {
		sw.encode(record{Member: &v.members[i]})
	}
	for i := range v.requests {
		sw.encode(record{Request: &v.requests[i]})
	}
	for i := range v.delays {
		sw.encode(record{Delay: &v.delays[i]})
	}
	for i := range v.permits {
		sw.encode(record{Permit: &v.permits[i]})
	}
	return sw.close()
}

func (img *Image) state() *state {
	s := newState()
	s.clusterID = img.Header.ClusterID
	s.epoch = img.Header.Epoch
	s.floor = img.Header.EpochFloor
	s.lastToken = img.Header.LastToken
	for i := range img.Locks {
		s.add(newLockEntry(&img.Locks[i]))
	}
	for i := range img.Keys {
		k := img.Keys[i]
		s.setKey(&k)
	}
	for _, m := range img.Members {
		s.members[m.ID] = m
	}
	for _, r := range img.Requests {
		s.remember(s.shareKey(r.Key), r.Token)
	}
	for _, d := range img.Delays {
		s.delays[d.Lock] = d
	}
	for i := range img.Permits {
		p := img.Permits[i]
		s.addPermit(&p)
	}
	return s
}

// shareKey returns key, or the same string inside the held lock it belongs
// to, so a restored request table costs no string per held lock.
func (s *state) shareKey(key string) string {
	if i := strings.IndexByte(key, 0); i >= 0 {
		if e, ok := s.locks[key[:i]]; ok && e.requestKey() == key {
			return e.requestKey()
		}
	}
	return key
}

// WriteTo writes the image in snapshot format: a header line, then one JSON
// record per line.
func (img *Image) WriteTo(w io.Writer) (int64, error) {
	sw := newSnapshotWriter(w)
	sw.encode(img.Header)
	for i := range img.Locks {
		sw.encode(record{Lock: &img.Locks[i]})
	}
	for i := range img.Keys {
		sw.encode(record{Key: &img.Keys[i]})
	}
	for i := range img.Members {
		sw.encode(record{Member: &img.Members[i]})
	}
	for i := range img.Requests {
		sw.encode(record{Request: &img.Requests[i]})
	}
	for i := range img.Delays {
		sw.encode(record{Delay: &img.Delays[i]})
	}
	for i := range img.Permits {
		sw.encode(record{Permit: &img.Permits[i]})
	}
	return sw.close()
}

// snapshotWriter encodes snapshot lines through a buffer; the first error
// stops it and is returned by close.
type snapshotWriter struct {
	bw  *bufio.Writer
	cw  *countingWriter
	enc *json.Encoder
	err error
}

func newSnapshotWriter(w io.Writer) *snapshotWriter {
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	return &snapshotWriter{bw: bw, cw: cw, enc: json.NewEncoder(bw)}
}

func (sw *snapshotWriter) encode(v any) {
	if sw.err == nil {
		sw.err = sw.enc.Encode(v)
	}
}

func (sw *snapshotWriter) close() (int64, error) {
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
	dec := json.NewDecoder(bufio.NewReader(r))
	dec.DisallowUnknownFields()
	img := &Image{}
	if err := dec.Decode(&img.Header); err != nil {
		return nil, fmt.Errorf("snapshot header: %w", err)
	}
	if img.Header.Format != SnapshotFormat {
		return nil, fmt.Errorf("not a fencer snapshot (format %q)", img.Header.Format)
	}
	if img.Header.Version != SnapshotVersion {
		return nil, fmt.Errorf("snapshot version %d is not supported (want %d)", img.Header.Version, SnapshotVersion)
	}
	for {
		var rec record
		err := dec.Decode(&rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot record: %w", err)
		}
		switch {
		case rec.Lock != nil:
			img.Locks = append(img.Locks, *rec.Lock)
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
		default:
			return nil, errors.New("snapshot record: empty record")
		}
	}
	h := img.Header
	if len(img.Locks) != h.Locks || len(img.Keys) != h.Keys || len(img.Members) != h.Members || len(img.Requests) != h.Requests || len(img.Delays) != h.Delays || len(img.Permits) != h.Permits {
		return nil, fmt.Errorf("snapshot is incomplete: header says %d locks, %d keys, %d members, %d requests, %d delays; found %d, %d, %d, %d, %d",
			h.Locks, h.Keys, h.Members, h.Requests, h.Delays, len(img.Locks), len(img.Keys), len(img.Members), len(img.Requests), len(img.Delays))
	}
	if err := img.check(); err != nil {
		return nil, fmt.Errorf("snapshot is inconsistent: %w", err)
	}
	return img, nil
}

// Image returns a copy of the whole state.
func (f *FSM) Image() *Image { return f.View().Image() }

// Digest is a hash of the replicated state, equal on replicas that applied
// the same log. The applied index is left out: replicas compare state, not
// progress.
func (f *FSM) Digest() string {
	_, d := f.DigestAt()
	return d
}

// DigestAt returns the applied index and the digest of the same state.
func (f *FSM) DigestAt() (uint64, string) {
	v := f.View()
	applied := v.Header.AppliedIndex
	v.Header.AppliedIndex, v.Header.Term = 0, 0
	h := sha256.New()
	if _, err := v.WriteTo(h); err != nil {
		panic(err) // hashing never fails
	}
	return applied, hex.EncodeToString(h.Sum(nil))
}

type snapshot struct{ v *View }

// Persist writes the snapshot; on any error the sink is cancelled so raft
// never keeps half a snapshot.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.v.WriteTo(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() {}

// check refuses records that no log could have produced: duplicates, locks
// without a name, token or TTL, and tokens above the header's last token.
func (img *Image) check() error {
	if img.Header.EpochFloor > img.Header.Epoch {
		return fmt.Errorf("epoch floor %d above epoch %d", img.Header.EpochFloor, img.Header.Epoch)
	}
	seen := map[string]bool{}
	once := func(kind, id string) error {
		if seen[kind+"\x00"+id] {
			return fmt.Errorf("duplicate %s %q", kind, id)
		}
		seen[kind+"\x00"+id] = true
		return nil
	}
	for _, l := range img.Locks {
		if l.Name == "" || l.Token == 0 || l.TTLMillis <= 0 {
			return fmt.Errorf("lock %q with token %d and ttl %d ms", l.Name, l.Token, l.TTLMillis)
		}
		if l.Token > img.Header.LastToken {
			return fmt.Errorf("lock %q token %d exceeds last token %d", l.Name, l.Token, img.Header.LastToken)
		}
		if TokenEpoch(l.Token) < img.Header.EpochFloor {
			// Restore and recovery void every grant (locks and permits)
			// when they set the floor, so none is held with a token
			// below it.
			return fmt.Errorf("lock %q token %d is of an epoch below the floor %d", l.Name, l.Token, img.Header.EpochFloor)
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
		if TokenEpoch(p.Token) < img.Header.EpochFloor {
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
	return nil
}
