package limits

import (
	"math"
	"sync"
	"time"
)

// Buckets is a small token bucket per client: Allow spends one token of
// key's bucket, which holds up to Burst and refills at Rate per second. It
// is for a route whose request is costly behind it (the members view asks
// every member), on top of RateLimit's limit for every route. The map is
// bounded: a full bucket is forgotten, since it is what a new one is.
type Buckets struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// maxBuckets bounds how many clients are remembered between sweeps.
const maxBuckets = 10_000

// NewBuckets makes buckets of burst tokens refilled at rate per second.
func NewBuckets(rate float64, burst int) *Buckets {
	return &Buckets{rate: rate, burst: float64(burst), now: time.Now, buckets: map[string]*bucket{}}
}

// Allow spends one of key's tokens, or says how long until one is there.
func (b *Buckets) Allow(key string) (ok bool, retryAfter time.Duration) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.buckets[key]
	if k == nil {
		if len(b.buckets) >= maxBuckets {
			b.sweep(now)
		}
		k = &bucket{tokens: b.burst, at: now}
		b.buckets[key] = k
	}
	k.tokens = math.Min(b.burst, k.tokens+now.Sub(k.at).Seconds()*b.rate)
	k.at = now
	if k.tokens >= 1 {
		k.tokens--
		return true, 0
	}
	return false, time.Duration((1 - k.tokens) / b.rate * float64(time.Second))
}

// sweep forgets the buckets that have refilled.
func (b *Buckets) sweep(now time.Time) {
	for key, k := range b.buckets {
		if k.tokens+now.Sub(k.at).Seconds()*b.rate >= b.burst {
			delete(b.buckets, key)
		}
	}
}
