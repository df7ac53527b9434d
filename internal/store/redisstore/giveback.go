package redisstore

import (
	"context"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// giveBackScript undoes a reservation its consumer never received (see
// store.Store.GiveBack): ready again, the attempt taken back, and no
// other field touched, so it costs no attempt and never buries. The job
// keeps its due time, so it also keeps its place in the age index.
//
//	KEYS[1]    -> the job's topic key prefix (keys.go)
//	ARGV[1]    -> "i" (by id) or "s" (by seq)
//	ARGV[2]    -> the id or seq
//	ARGV[3]    -> reservation
//	ARGV[4]    -> this instance's id (its own waiting mark does not count)
//	Returns:   {"OK", record, woke} (wokeLua), {"NOTFOUND"} or {"NOTRESERVED"}
var giveBackScript = newScript(wokeLua + `
local seq, j = find(ARGV[1], ARGV[2])
if not seq then return {'NOTFOUND'} end
if not held(j, ARGV[3]) then return {'NOTRESERVED'} end
unplace(seq, j)
clear(j)
-- a give-back acts at no time: the attempt ends when it began
hend(j, hreserved(j), 'gave_back', '')
if tonumber(j.att) > 0 then j.att = fmt(tonumber(j.att) - 1) end
j.state = 'ready'
place(seq, j)
return {'OK', save(seq, j), woke(j, ARGV[4])}
`)

// GiveBack implements store.Store. The job is ready again: the other
// instances' waiters on its topic hear of it (afterMove); its old deadline may stay in
// the bucket index, which is allowed to be early, never late.
func (s *Store) GiveBack(ctx context.Context, p store.GiveBackParams) (*delayq.Job, error) {
	r, err := s.runJob(ctx, "give back", giveBackScript, p.Ref, p.Ref.Reservation, s.opt.InstanceID)
	if err != nil {
		return nil, err
	}
	s.afterMove(ctx, r)
	return r.job, nil
}
