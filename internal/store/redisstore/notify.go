package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Instances wake each other through one pub/sub channel, P:events: a put,
// timer step, release, give-back, kick, update or resume that makes jobs
// ready publishes the topic and count (the engines wake their long-poll
// waiters for it), and one that makes an
// earlier due time or deadline publishes that time (the engines' timers
// step). Each instance holds one subscription, whatever the number of
// waiting consumers, and fans events out in-process. An instance ignores
// its own events: its engine already knows.
//
// Pub/sub is best effort: an event lost while an instance reconnects costs
// latency, never a job. After a reconnect the instance tells its engine to
// step at once.
//
// A ready count is published only when an instance other than the
// publisher has marked the topic as waited on (MarkWaiting: its engine has
// long-poll waiters there), tested in the script that makes the jobs
// ready, atomically with it (waitedLua): the put scripts (insertScript,
// putOneScript), the timer step's (tickScript, tickOneScript), and those
// of a release, give-back, kick of one job and update (wokeLua), a kick
// (kickScript) and a resume (pauseScript). Without a waiter anywhere else
// a wake-up has no one to wake: on one node a put's cost a PUBSUB NUMSUB
// and, with two instances, a PUBLISH per put group; on a Cluster an
// SPUBLISH per put group and timer step, a request to another master
// (issue 31); a release or kick sent its PUBLISH (SPUBLISH) every time.
// Due times are not marked: every instance's timer listens.
//
// On a Redis Cluster (7.0 or later) the events go over sharded pub/sub
// instead: a PUBLISH there is sent to every node over the cluster bus
// (18-24 µs of Redis time each on a 3-master Cluster against about 1 µs
// standalone, plus the bus message every other node reads), while an
// SPUBLISH stays on the shard that owns its channel's slot. There are
// shardChannels channels, P:events:{<tag>}, whose tags fall one in each
// equal range of the slots, and every instance subscribes to all of them
// (SSUBSCRIBE, one per channel: a sharded subscription names one slot). A
// topic's events go to the channel of its slot's range, so with the usual
// contiguous slot ranges they stay on the master that holds the topic; an
// event without a topic goes to the channel of its due time's remainder.
// Every instance hears every event either way: which channel carries one
// only spreads the load.

// shardChannels is how many sharded channels carry a Cluster's events.
const shardChannels = 16

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// eventChannels are the channels this instance subscribes to and
// publishes on: P:events on one node (or a Cluster older than Redis 7),
// else the shardChannels sharded channels.
func (s *Store) eventChannels() []string {
	if !s.sharded {
		return []string{s.k.events()}
	}
	out := make([]string, shardChannels)
	for i := range out {
		out[i] = s.k.events() + ":{" + shardTag(i) + "}"
	}
	return out
}

// shardTag is the hash tag of sharded channel i: the first "e<n>" whose
// slot lies in the i-th of shardChannels equal ranges of the slots, so
// the channels spread over the masters as the slots do.
func shardTag(i int) string {
	for n := 0; ; n++ {
		tag := "e" + strconv.Itoa(n)
		if keySlot(tag)*shardChannels/clusterSlots == i {
			return tag
		}
	}
}

// keySlot is the Cluster hash slot of a hash tag's content:
// CRC16-XMODEM (polynomial 0x1021, initial value 0) mod 16384, as the
// Redis Cluster specification defines it.
func keySlot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// channelOf is the channel that carries e.
func (s *Store) channelOf(e event) string {
	chs := s.channels
	if len(chs) == 1 {
		return chs[0]
	}
	if e.topic != "" {
		return chs[keySlot(e.topic)*len(chs)/clusterSlots]
	}
	return chs[int(uint64(e.due)%uint64(len(chs)))]
}

// event is one wake-up. Its wire form is "instance topic count due" with
// "-" for no topic (a topic never starts with '-').
type event struct {
	topic string
	count int
	due   int64 // unix ms; 0 for none
}

func (e event) toStore() store.Event {
	return store.Event{Topic: e.topic, Count: e.count, Due: fromMS(e.due)}
}

// publish tells the other instances, all events in one pipeline; errors
// are ignored (best effort).
func (s *Store) publish(ctx context.Context, events ...event) {
	cmds := make(rueidis.Commands, len(events))
	for i, e := range events {
		topic := e.topic
		if topic == "" {
			topic = "-"
		}
		msg := fmt.Sprintf("%s %s %d %d", s.opt.InstanceID, topic, e.count, e.due)
		if ch := s.channelOf(e); s.sharded {
			cmds[i] = s.c.B().Spublish().Channel(ch).Message(msg).Build()
		} else {
			cmds[i] = s.c.B().Publish().Channel(ch).Message(msg).Build()
		}
	}
	s.c.DoMulti(ctx, cmds...)
}

// heard reports whether e, published now, may reach another instance:
// its channel has more subscribers than this instance's own (fanout.own),
// listenedLua's test from Go. One node's PUBSUB NUMSUB counts every
// subscriber, and a sharded Cluster's PUBSUB SHARDNUMSUB, sent to the
// shard of the channel, every subscriber of that channel; a Cluster
// older than Redis 7 counts one node's only, so there, and when Redis
// cannot say, the answer is yes.
func (s *Store) heard(ctx context.Context, e event) bool {
	if !s.oneNode && !s.sharded {
		return true
	}
	ch := s.channelOf(e)
	var cmd rueidis.Completed
	if s.sharded {
		cmd = s.c.B().PubsubShardnumsub().Channel(ch).Build()
	} else {
		cmd = s.c.B().PubsubNumsub().Channel(ch).Build()
	}
	arr, err := s.c.Do(ctx, cmd).ToArray()
	if err != nil || len(arr) != 2 {
		return true
	}
	n, err := arr[1].AsInt64()
	own, _ := strconv.ParseInt(s.fan.own(), 10, 64)
	return err != nil || n > own
}

// publishPut announces the jobs of a put (or of a group of puts): ready
// counts per topic, of the topics whose insert found another instance
// waiting (waited), and the earliest delayed due.
func (s *Store) publishPut(ctx context.Context, jobs []*delayq.Job, waited map[string]bool) {
	ready := map[string]int{}
	var topics []string
	var due int64
	for _, j := range jobs {
		if j.State == delayq.StateReady {
			if !waited[j.Topic] {
				continue
			}
			if ready[j.Topic] == 0 {
				topics = append(topics, j.Topic)
			}
			ready[j.Topic]++
		} else if d := ms(j.Due); due == 0 || d < due {
			due = d
		}
	}
	events := make([]event, 0, len(topics)+1)
	for _, t := range topics {
		events = append(events, event{topic: t, count: ready[t]})
	}
	if due != 0 {
		events = append(events, event{due: due})
	}
	if len(events) > 0 {
		s.publish(ctx, events...)
	}
}

// Marks of waiting instances.
//
// An engine with long-poll waiters on a topic marks it (MarkWaiting)
// before the store attempt that follows parking a waiter. The mark is a
// member of the topic's zset P:{t}:waiting, the instance id, scored with
// the end of its life in the Redis server's own TIME: on a Cluster the
// mark and every script that reads it run on the topic's master, so the
// instances' clocks never enter. A script that makes jobs of the topic
// ready reads the marks in the same atomic step (waitedLua) and the
// ready count is published only when a live mark of another instance is
// there. Either the transition ran before the mark was written, and so
// before the waiter's attempt, which finds its jobs; or after it, and
// publishes. A mark that lapses (its instance died, or stopped renewing)
// costs a waiter latency only: its long poll ends and its consumer
// comes back.

// waitedLua defines waited(k, me): whether an instance other than me
// holds a live mark in the marks zset k. The two latest marks suffice:
// if me's is one of them, the other is the latest of the rest. A topic
// no one waits on costs one ZREVRANGE of a missing key; TIME is read
// only when there are marks.
const waitedLua = `
local function waited(k, me)
  local w = redis.call('ZREVRANGE', k, 0, 1, 'WITHSCORES')
  if #w == 0 then return false end
  local now = serverMS()
  for i = 1, #w, 2 do
    if w[i] ~= me and tonumber(w[i + 1]) > now then return true end
  end
  return false
end
`

// markWaitingScript writes one instance's mark on a topic.
//
//	KEYS[1]    -> P:{t}:waiting
//	ARGV[1]    -> the instance id
//	ARGV[2]    -> the mark's life (ms)
//
// It drops the marks that ended (of instances that died or stopped
// waiting) and keeps the key while its latest mark lives, so a topic no
// one waits on any more leaves no key behind. Of the prelude it takes
// serverMS only (link), the clock waitedLua reads the marks by.
var markWaitingScript = newScript(`
local now = serverMS()
local life = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + life, ARGV[1])
if redis.call('PTTL', KEYS[1]) < life then redis.call('PEXPIRE', KEYS[1], life) end
return 1
`)

var _ store.WaitMarker = (*Store)(nil)

// MarkWaiting implements store.WaitMarker: one script per topic, all in
// one round trip (on a Cluster each to its topic's master).
func (s *Store) MarkWaiting(ctx context.Context, topics []string, life time.Duration) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(topics) == 0 {
		return nil
	}
	lifeMS := strconv.FormatInt(max(life.Milliseconds(), 1), 10)
	execs := make([]rueidis.LuaExec, len(topics))
	for i, t := range topics {
		execs[i] = rueidis.LuaExec{Keys: []string{s.k.waiting(t)}, Args: []string{s.opt.InstanceID, lifeMS}}
	}
	for _, r := range execMulti(ctx, s.c, markWaitingScript, execs) {
		if err := r.Error(); err != nil {
			return unavailable("mark waiting", err)
		}
	}
	return nil
}

func parseEvent(msg string) (self string, e event, ok bool) {
	f := strings.Fields(msg)
	if len(f) != 4 {
		return "", e, false
	}
	if f[1] != "-" {
		e.topic = f[1]
	}
	e.count, _ = strconv.Atoi(f[2])
	e.due, _ = strconv.ParseInt(f[3], 10, 64)
	return f[0], e, true
}

// subscribe runs this instance's subscriptions until ctx is done: one to
// P:events, or on a sharded Cluster one to each channel.
func (s *Store) subscribe(ctx context.Context) {
	chs := s.channels
	s.fan.expect(len(chs))
	var wg sync.WaitGroup
	for i, ch := range chs {
		wg.Go(func() { s.receive(ctx, i, ch) })
	}
	wg.Wait()
}

// receive runs subscription i, to channel ch, until ctx is done,
// reconnecting after failures.
func (s *Store) receive(ctx context.Context, i int, ch string) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		hooked := rueidis.WithOnSubscriptionHook(ctx, func(sub rueidis.PubSubSubscription) {
			s.fan.setSubscribed(i, sub.Kind == "subscribe" || sub.Kind == "ssubscribe")
		})
		var cmd rueidis.Completed
		if s.sharded {
			cmd = s.c.B().Ssubscribe().Channel(ch).Build()
		} else {
			cmd = s.c.B().Subscribe().Channel(ch).Build()
		}
		err := s.c.Receive(hooked, cmd, s.onMessage)
		s.fan.setSubscribed(i, false)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > 5*time.Second {
			backoff = 100 * time.Millisecond
		}
		s.log.Warn("redisstore: event subscription lost; reconnecting", "channel", ch, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
		// Events may have been missed: let the timer step now.
		s.fan.Send(dueNow().toStore())
	}
}

func (s *Store) onMessage(m rueidis.PubSubMessage) {
	self, e, ok := parseEvent(m.Message)
	if !ok || self == s.opt.InstanceID {
		return
	}
	s.fan.Send(e.toStore())
}

// Listening reports whether events published by other instances reach
// this instance's Notify readers now: Redis has confirmed the subscription
// and a reader is registered. Pub/sub keeps no backlog, so an event sent
// before then is never heard; tests wait for this instead of sleeping.
func (s *Store) Listening() bool { return s.fan.listening() }

// Notify implements store.Notifier.
func (s *Store) Notify(ctx context.Context) (<-chan store.Event, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.fan.Subscribe(ctx), nil
}

// fanout is the store's Fanout of events to Notify channels, with what
// Redis has confirmed of this instance's subscriptions: events published
// by others reach it only once every one is confirmed.
type fanout struct {
	*store.Fanout
	mu         sync.Mutex
	want       int          // guarded by mu: subscriptions the instance holds (expect)
	subscribed map[int]bool // guarded by mu: those Redis has confirmed
}

func newFanout() *fanout {
	return &fanout{Fanout: store.NewFanout(4096), want: 1, subscribed: map[int]bool{}}
}

// expect sets how many subscriptions must be confirmed for events to
// reach this instance (one per channel).
func (f *fanout) expect(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.want = n
}

func (f *fanout) setSubscribed(i int, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.subscribed[i] = true
	} else {
		delete(f.subscribed, i)
	}
}

// all reports whether every subscription is confirmed.
func (f *fanout) all() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subscribed) >= f.want
}

// own is "1" while Redis has confirmed this instance's subscription,
// else "0": how many of the event channel's subscribers are this
// instance (listenedLua).
func (f *fanout) own() string {
	if f.all() {
		return "1"
	}
	return "0"
}

func (f *fanout) listening() bool { return f.all() && f.Subscribers() > 0 }
