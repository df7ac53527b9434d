package auth

import (
	"fmt"
	"slices"
)

// Op is one operation a client can ask for, named the same whatever the
// protocol: each front end maps its routes, commands or methods to an Op
// and asks Need what the caller must hold. The table below is the one
// place that says which scope each operation takes; docs/security.md
// shows it per protocol.
type Op string

// The operations. Each needs what ops says for it.
const (
	// OpPut puts jobs into a topic.
	OpPut Op = "put"
	// OpReserve reserves jobs from the topics the call lists (or the
	// connection watches): consume on each of them.
	OpReserve Op = "reserve"
	// OpReserveJob reserves one job named by id (beanstalkd's
	// reserve-job).
	OpReserveJob Op = "reserve-job"
	// OpFinish finishes a reserved job.
	OpFinish Op = "finish"
	// OpRelease hands a reserved job back, now or after a delay.
	OpRelease Op = "release"
	// OpTouch extends a reservation.
	OpTouch Op = "touch"
	// OpBury sets a reserved job aside.
	OpBury Op = "bury"
	// OpGet reads one job.
	OpGet Op = "get"
	// OpUpdate changes a job in place (due time, priority, body...).
	OpUpdate Op = "update"
	// OpDelete revokes a job: its producer's (admin implies produce).
	OpDelete Op = "delete"
	// OpKickJob makes one buried or delayed job ready.
	OpKickJob Op = "kick-job"
	// OpList lists or peeks at a topic's jobs.
	OpList Op = "list"
	// OpTopic reads one topic's counts.
	OpTopic Op = "topic"
	// OpTopics lists the topics: it shows every topic's name.
	OpTopics Op = "topics"
	// OpCharts reads one topic's charts (due times, history).
	OpCharts Op = "charts"
	// OpKick makes a topic's buried jobs ready.
	OpKick Op = "kick"
	// OpPause pauses a topic.
	OpPause Op = "pause"
	// OpResume resumes a paused topic.
	OpResume Op = "resume"
	// OpPurge deletes a topic's jobs in bulk.
	OpPurge Op = "purge"
	// OpGetPolicy reads a topic's policy: reading the topic.
	OpGetPolicy Op = "get-policy"
	// OpSetPolicy sets or deletes a topic's policy, which changes how
	// every producer's jobs in it behave.
	OpSetPolicy Op = "set-policy"
	// OpPolicies lists every topic's policy.
	OpPolicies Op = "policies"
	// OpStats reads the whole server's statistics and metrics.
	OpStats Op = "stats"
	// OpSchedules reads the schedules.
	OpSchedules Op = "schedules"
	// OpSchedule creates, changes, deletes, pauses or resumes a schedule:
	// a standing producer into the topic its body names.
	OpSchedule Op = "schedule"
	// OpAlarms reads the alarms.
	OpAlarms Op = "alarms"
	// OpAlarm sets or deletes an alarm, which makes the server POST to a
	// URL of the caller's choosing.
	OpAlarm Op = "alarm"
	// OpBackup streams a checkpoint, which holds every job.
	OpBackup Op = "backup"
	// OpCommand runs a command of the original JSON protocol, whose topic
	// is inside the body, after the check.
	OpCommand Op = "command"
	// OpCluster reads the instances sharing the store.
	OpCluster Op = "cluster"
	// OpSession reads who the caller is (the dashboard's session).
	OpSession Op = "session"
	// OpConnection changes or reads only the connection's own state
	// (beanstalkd's use, watch, ignore, list-tube-used, quit).
	OpConnection Op = "connection"
	// OpLogin logs in or out: logging in checks the token it is given,
	// and logging out must work with an ended session too.
	OpLogin Op = "login"
	// OpHealth answers health and readiness probes.
	OpHealth Op = "health"
	// OpDescribe serves what holds no data: the API's description and the
	// dashboard's static files (which show a login when the API answers
	// 401).
	OpDescribe Op = "describe"
)

// On says which topics an operation's scopes are checked on.
type On int

// The targets of a check.
const (
	// OnAnyone: no check, and no caller needed.
	OnAnyone On = iota
	// OnCaller: any authenticated caller, no scope.
	OnCaller
	// OnTopics: the scopes on each topic the call names.
	OnTopics
	// OnJobs: the scopes on the topic of each job the call names. A front
	// end checks that the caller holds them on some topic before the call
	// (Principal.MaySome), and checks each job's own topic where the job
	// is acted on (Principal.May), so a job put again under the same id
	// in another topic in between is not acted on unchecked. A job held
	// by a reservation of the same connection (beanstalkd) has had its
	// topic checked when it was reserved.
	OnJobs
	// OnEvery: the scopes on every topic ("*"): calls whose topics are not
	// known before they run, or that show every topic.
	OnEvery
)

// Need is what an operation asks of its caller: every one of Scopes, on
// the topics On names.
type Need struct {
	Scopes []Scope
	On     On
}

// ops is the scope table of every protocol.
var ops = map[Op]Need{
	OpPut:        {[]Scope{Produce}, OnTopics},
	OpReserve:    {[]Scope{Consume}, OnTopics},
	OpReserveJob: {[]Scope{Consume}, OnJobs},
	OpFinish:     {[]Scope{Consume}, OnJobs},
	OpRelease:    {[]Scope{Consume}, OnJobs},
	OpTouch:      {[]Scope{Consume}, OnJobs},
	OpBury:       {[]Scope{Consume}, OnJobs},
	OpGet:        {[]Scope{Read}, OnJobs},
	OpUpdate:     {[]Scope{Admin}, OnJobs},
	OpDelete:     {[]Scope{Produce}, OnJobs}, // a producer revokes its jobs; admin implies produce
	OpKickJob:    {[]Scope{Admin}, OnJobs},
	OpList:       {[]Scope{Read}, OnTopics},
	OpTopic:      {[]Scope{Read}, OnTopics},
	OpTopics:     {[]Scope{Read}, OnEvery},
	OpCharts:     {[]Scope{Read}, OnTopics},
	OpKick:       {[]Scope{Admin}, OnTopics},
	OpPause:      {[]Scope{Admin}, OnTopics},
	OpResume:     {[]Scope{Admin}, OnTopics},
	OpPurge:      {[]Scope{Admin}, OnTopics},
	OpGetPolicy:  {[]Scope{Read}, OnTopics},
	OpSetPolicy:  {[]Scope{Admin}, OnTopics},
	OpPolicies:   {[]Scope{Read}, OnEvery},
	OpStats:      {[]Scope{Read}, OnEvery},
	OpSchedules:  {[]Scope{Read}, OnEvery},
	OpSchedule:   {[]Scope{Admin}, OnEvery},
	OpAlarms:     {[]Scope{Read}, OnEvery},
	OpAlarm:      {[]Scope{Admin}, OnEvery},
	OpBackup:     {[]Scope{Admin}, OnEvery},
	OpCommand:    {[]Scope{Produce, Consume}, OnEvery},
	OpCluster:    {nil, OnCaller},
	OpSession:    {nil, OnCaller},
	OpConnection: {nil, OnCaller},
	OpLogin:      {nil, OnAnyone},
	OpHealth:     {nil, OnAnyone},
	OpDescribe:   {nil, OnAnyone},
}

// NeedOf returns what op asks of its caller; ok is false for an operation
// the table does not know, which a front end must refuse (its tests check
// that each of its calls maps to a known one).
func NeedOf(op Op) (n Need, ok bool) {
	n, ok = ops[op]
	return n, ok
}

// Ops lists every operation of the table, sorted.
func Ops() []Op {
	out := make([]Op, 0, len(ops))
	for op := range ops {
		out = append(out, op)
	}
	slices.Sort(out)
	return out
}

// May reports whether p may run op on topic (a topic the call names, or
// the topic of a job it names). Operations checked on every topic need
// their scopes on every topic; those that need only a caller, a non-nil
// p. An operation the table does not know is allowed nobody.
func (p *Principal) May(op Op, topic string) bool {
	return p.may(op, func(s Scope) bool { return p.Allows(s, topic) })
}

// MayAll reports whether p may run op on every topic: then a front end
// need not look up the topics of the jobs a call names.
func (p *Principal) MayAll(op Op) bool { return p.may(op, p.AllowsAll) }

// MaySome reports whether p may run op on at least one topic: the check
// before a call that names jobs, whose topics are checked as each job is
// acted on.
func (p *Principal) MaySome(op Op) bool { return p.may(op, p.AllowsSome) }

// may is the walk the three checks share: the table entry's target
// decides, and an operation on topics needs each of its scopes, as has
// says (an operation checked on every topic always asks AllowsAll).
func (p *Principal) may(op Op, has func(Scope) bool) bool {
	n, ok := ops[op]
	if !ok {
		return false
	}
	switch n.On {
	case OnAnyone:
		return true
	case OnCaller:
		return p != nil
	case OnEvery:
		has = p.AllowsAll
	}
	for _, s := range n.Scopes {
		if !has(s) {
			return false
		}
	}
	return true
}

// Denied explains why p may not run op, in the words of its table
// entry, naming the first scope p lacks, for a front end to send back.
// topic is the topic refused, or "" when the call was refused before any
// topic was known (a call that names jobs, checked on some topic first).
func (p *Principal) Denied(op Op, topic string) string {
	n := ops[op]
	switch {
	case len(n.Scopes) == 0:
		return "this call needs a valid token"
	case n.On == OnEvery:
		for _, s := range n.Scopes {
			if !p.AllowsAll(s) {
				return fmt.Sprintf("this call needs the %s scope on every topic (\"*\")", s)
			}
		}
	case n.On == OnTopics && topic != "":
		for _, s := range n.Scopes {
			if !p.Allows(s, topic) {
				return fmt.Sprintf("this token has no %s scope on topic %q", s, topic)
			}
		}
	default:
		for _, s := range n.Scopes {
			if !p.AllowsSome(s) {
				return fmt.Sprintf("this call needs the %s scope", s)
			}
		}
	}
	return fmt.Sprintf("this call needs the %s scope", n.Scopes[0])
}
