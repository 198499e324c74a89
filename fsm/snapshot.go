package fsm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// SnapshotFormat names fencer's snapshot format in its header.
const SnapshotFormat = "fencer-snapshot"

// SnapshotVersion is the current snapshot format version.
const SnapshotVersion = 1

// Header is the first record of a snapshot.
type Header struct {
	Format       string `json:"format"`
	Version      int    `json:"version"`
	ClusterID    string `json:"cluster_id,omitempty"`
	Epoch        uint64 `json:"epoch"`
	LastToken    uint64 `json:"last_token"`
	AppliedIndex uint64 `json:"applied_index"`
	Term         uint64 `json:"term"`
	Locks        int    `json:"locks"`
	Keys         int    `json:"keys"`
	Members      int    `json:"members"`
	Requests     int    `json:"requests"`
}

// Image is a decoded snapshot: the whole replicated state, sorted so that two
// replicas in the same state produce byte-identical snapshots.
type Image struct {
	Header   Header
	Locks    []Lock
	Keys     []FencedKey
	Members  []Member
	Requests []requestRecord
}

// record is one line of a snapshot after the header. Exactly one field is set.
type record struct {
	Lock    *Lock          `json:"lock,omitempty"`
	Key     *FencedKey     `json:"key,omitempty"`
	Member  *Member        `json:"member,omitempty"`
	Request *requestRecord `json:"request,omitempty"`
}

func (f *FSM) imageLocked() *Image {
	s := f.s
	img := &Image{Header: Header{
		Format:       SnapshotFormat,
		Version:      SnapshotVersion,
		ClusterID:    s.clusterID,
		Epoch:        s.epoch,
		LastToken:    s.lastToken,
		AppliedIndex: f.applied,
		Term:         f.term,
		Locks:        len(s.locks),
		Keys:         len(s.keys),
		Members:      len(s.members),
		Requests:     len(s.reqOrder),
	}}
	for _, name := range sortedKeys(s.locks) {
		img.Locks = append(img.Locks, *s.locks[name])
	}
	for _, k := range sortedKeys(s.keys) {
		img.Keys = append(img.Keys, *s.keys[k])
	}
	for _, id := range sortedKeys(s.members) {
		img.Members = append(img.Members, s.members[id])
	}
	for _, k := range s.reqOrder { // log order: eviction order must survive
		img.Requests = append(img.Requests, requestRecord{Key: k, Token: s.requests[k]})
	}
	return img
}

func (img *Image) state() *state {
	s := newState()
	s.clusterID = img.Header.ClusterID
	s.epoch = img.Header.Epoch
	s.lastToken = img.Header.LastToken
	for i := range img.Locks {
		l := img.Locks[i]
		s.locks[l.Name] = &l
		s.byHolder[l.Holder]++
	}
	for i := range img.Keys {
		k := img.Keys[i]
		s.keys[k.Key] = &k
	}
	for _, m := range img.Members {
		s.members[m.ID] = m
	}
	for _, r := range img.Requests {
		s.remember(r.Key, r.Token)
	}
	return s
}

// WriteTo writes the image in snapshot format: a header line, then one JSON
// record per line.
func (img *Image) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	cw := &countingWriter{w: bw}
	enc := json.NewEncoder(cw)
	if err := enc.Encode(img.Header); err != nil {
		return cw.n, err
	}
	for i := range img.Locks {
		if err := enc.Encode(record{Lock: &img.Locks[i]}); err != nil {
			return cw.n, err
		}
	}
	for i := range img.Keys {
		if err := enc.Encode(record{Key: &img.Keys[i]}); err != nil {
			return cw.n, err
		}
	}
	for i := range img.Members {
		if err := enc.Encode(record{Member: &img.Members[i]}); err != nil {
			return cw.n, err
		}
	}
	for i := range img.Requests {
		if err := enc.Encode(record{Request: &img.Requests[i]}); err != nil {
			return cw.n, err
		}
	}
	return cw.n, bw.Flush()
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
		default:
			return nil, errors.New("snapshot record: empty record")
		}
	}
	h := img.Header
	if len(img.Locks) != h.Locks || len(img.Keys) != h.Keys || len(img.Members) != h.Members || len(img.Requests) != h.Requests {
		return nil, fmt.Errorf("snapshot is incomplete: header says %d locks, %d keys, %d members, %d requests; found %d, %d, %d, %d",
			h.Locks, h.Keys, h.Members, h.Requests, len(img.Locks), len(img.Keys), len(img.Members), len(img.Requests))
	}
	if err := img.check(); err != nil {
		return nil, fmt.Errorf("snapshot is inconsistent: %w", err)
	}
	return img, nil
}

// Image returns a copy of the whole state.
func (f *FSM) Image() *Image {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.imageLocked()
}

// Digest is a hash of the replicated state, equal on replicas that applied
// the same log. The applied index is left out: replicas compare state, not
// progress.
func (f *FSM) Digest() string {
	_, d := f.DigestAt()
	return d
}

// DigestAt returns the applied index and the digest of the same state.
func (f *FSM) DigestAt() (uint64, string) {
	img := f.Image()
	applied := img.Header.AppliedIndex
	img.Header.AppliedIndex, img.Header.Term = 0, 0
	h := sha256.New()
	if _, err := img.WriteTo(h); err != nil {
		panic(err) // hashing never fails
	}
	return applied, hex.EncodeToString(h.Sum(nil))
}

type snapshot struct{ img *Image }

// Persist writes the snapshot; on any error the sink is cancelled so raft
// never keeps half a snapshot.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.img.WriteTo(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() {}

// check refuses records that no log could have produced: duplicates, locks
// without a name, token or TTL, and tokens above the header's last token.
func (img *Image) check() error {
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
	return nil
}
