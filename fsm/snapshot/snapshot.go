package snapshot

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/fencer-io/fencer/fsm/entry"
)

// Format names fencer's snapshot format in its header.
const Format = "fencer-snapshot"

// Version is the current snapshot format version.
const Version = 1

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
	Locks    []entry.Lock
	Keys     []entry.FencedKey
	Members  []entry.Member
	Requests []entry.RequestRecord
	Delays   []entry.Delay
	Permits  []entry.Permit
}

// Record is one line of a snapshot after the header. Exactly one field is set.
type Record struct {
	Lock    *entry.Lock          `json:"lock,omitempty"`
	Key     *entry.FencedKey     `json:"key,omitempty"`
	Member  *entry.Member        `json:"member,omitempty"`
	Request *entry.RequestRecord `json:"request,omitempty"`
	Delay   *entry.Delay         `json:"delay,omitempty"`
	Permit  *entry.Permit        `json:"permit,omitempty"`
}

// WriteTo writes the image in snapshot format: a header line, then one JSON
// record per line.
func (img *Image) WriteTo(w io.Writer) (int64, error) {
	sw := NewWriter(w)
	sw.Encode(img.Header)
	for i := range img.Locks {
		sw.Encode(Record{Lock: &img.Locks[i]})
	}
	for i := range img.Keys {
		sw.Encode(Record{Key: &img.Keys[i]})
	}
	for i := range img.Members {
		sw.Encode(Record{Member: &img.Members[i]})
	}
	for i := range img.Requests {
		sw.Encode(Record{Request: &img.Requests[i]})
	}
	for i := range img.Delays {
		sw.Encode(Record{Delay: &img.Delays[i]})
	}
	for i := range img.Permits {
		sw.Encode(Record{Permit: &img.Permits[i]})
	}
	return sw.Close()
}

// Writer encodes snapshot lines through a buffer; the first error
// stops it and is returned by close.
type Writer struct {
	bw  *bufio.Writer
	cw  *countingWriter
	enc *json.Encoder
	err error
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
	dec := json.NewDecoder(bufio.NewReader(r))
	dec.DisallowUnknownFields()
	img := &Image{}
	if err := dec.Decode(&img.Header); err != nil {
		return nil, fmt.Errorf("snapshot header: %w", err)
	}
	if img.Header.Format != Format {
		return nil, fmt.Errorf("not a fencer snapshot (format %q)", img.Header.Format)
	}
	if img.Header.Version != Version {
		return nil, fmt.Errorf("snapshot version %d is not supported (want %d)", img.Header.Version, Version)
	}
	for {
		var rec Record
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
		if entry.TokenEpoch(l.Token) < img.Header.EpochFloor {
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
	return nil
}
