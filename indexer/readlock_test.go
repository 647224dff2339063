package indexer

import "testing"

// A panic under a request's read lock (recovered by the service, which keeps serving) must not
// leave the lock held: the next catalog update would block for good. The unlock is also safe to
// call twice (by hand, then by defer).
func TestReadLockReleasedOnPanic(t *testing.T) {
	c := &Catalog{}
	func() {
		defer func() { _ = recover() }()
		unlock := c.readLock()
		defer unlock()
		panic("under the lock")
	}()
	if !c.mu.TryLock() {
		t.Fatal("the read lock is still held after a panic under it")
	}
	c.mu.Unlock()

	unlock := c.readLock()
	unlock()
	unlock()
	if !c.mu.TryLock() {
		t.Fatal("the read lock is held after unlocking (twice)")
	}
	c.mu.Unlock()
}
