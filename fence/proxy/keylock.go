package proxy

import (
	"context"
	"sync"
)

// keyLocks holds one lock per fence key, made when a write of the key
// arrives and dropped when the last one leaves, so the map stays as small as
// the set of keys being written.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	held chan struct{} // full while a write holds the key
	refs int           // writes holding or waiting; guarded by keyLocks.mu
}

// lock waits for key and returns its unlock, or the context's error if the
// client gives up first (its write was never checked, so it changes
// nothing).
func (k *keyLocks) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{held: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()

	select {
	case l.held <- struct{}{}:
		return func() { <-l.held; k.release(key, l) }, nil
	case <-ctx.Done():
		k.release(key, l)
		return nil, ctx.Err()
	}
}

func (k *keyLocks) release(key string, l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(k.locks, key)
	}
}
