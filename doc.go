// Package delayq is the vocabulary shared by every part of delayq, the
// durable delay queue server: the Job and its State, references to jobs
// (Ref), topic statistics, name rules, limits and the error sentinels that
// mean the same thing on both sides of the wire.
//
// It holds no state and imports only the standard library, so the server,
// the Go SDK (package client) and the wire types (package api) can all share
// it. The server itself lives under internal/; its architecture is
//
//	front ends (HTTP, beanstalkd) → engine → store (embedded or Redis)
//
// and is described in docs/architecture.md.
package delayq
