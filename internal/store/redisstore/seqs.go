package redisstore

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// An instance takes seqs from P:seq in blocks (seqScript hands out a
// block as it handed out one put's seqs before) and gives them to its
// puts from memory, so a put costs Redis no TIME, GET and SET of the
// counter (issue 31: those were a fifth of the one-node put script), and
// on a Cluster the master that holds P:seq serves one script per block,
// not one per put, so the puts' Redis CPU spreads over the masters.
//
// Seqs stay unique (every block is a range no other block shares) and
// grow within an instance (it takes a new block only past its current
// one, and seqScript never hands out less than it did). Across instances
// a job put later may get a smaller seq than one put earlier through
// another instance, for at most seqBlockAge: an instance drops a block
// older than that, so the serving order of a priority is put order to
// within seqBlockAge. Each block moves the counter seqBlock ahead, while
// the clock under it moves a million a second: an instance takes at most
// 1/seqBlockAge blocks a second at low rates, so the counter keeps to the
// clock (seqScript's rule) up to hundreds of thousands of puts a second.

// seqBlock is how many seqs an instance takes at a time.
const seqBlock = 1024

// seqBlockAge is how long an instance hands out seqs of one block.
const seqBlockAge = 50 * time.Millisecond

// seqBlocks is an instance's current block.
type seqBlocks struct {
	mu   sync.Mutex
	next uint64    // guarded by mu: the next seq to hand out
	left int       // guarded by mu: how many are left from next
	at   time.Time // guarded by mu: when the block was taken
}

// takeSeqs hands out n consecutive seqs and returns the first.
func (s *Store) takeSeqs(ctx context.Context, n int) (uint64, error) {
	b := &s.seqs
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left < n || time.Since(b.at) >= seqBlockAge {
		size := max(n, seqBlock)
		last, err := seqScript.Exec(ctx, s.c, []string{s.k.seqCounter()}, []string{strconv.Itoa(size)}).AsInt64()
		if err != nil {
			return 0, unavailable("put: seq", err)
		}
		b.next, b.left, b.at = uint64(last)-uint64(size)+1, size, time.Now()
	}
	first := b.next
	b.next += uint64(n)
	b.left -= n
	return first, nil
}
