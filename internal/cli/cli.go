// Package cli is the delayq command line: `delayq serve` runs a server, and
// the other subcommands (put, reserve, finish, delete, get, kick, topics,
// stats) are a person's view of a running server through the public HTTP
// API (package client), never through the store. Every output goes to the
// writers Main is given, so tests read it.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/buildinfo"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/redact"
)

// Exit codes of Main.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed
	exitUsage = 2 // the command line was wrong
	// exitRepairLost: `delayq repair` wrote the repaired store, and the
	// store had acknowledged data it could not keep (named on stdout).
	exitRepairLost = 3
)

// root is the command tree. Kong builds flags, env vars and help from the
// tags.
type root struct {
	Version kong.VersionFlag `help:"Print the version, commit and Go version of this binary, then exit."`

	Serve   serveCmd   `cmd:"" help:"Run a delayq server."`
	Put     putCmd     `cmd:"" help:"Put a job into a topic."`
	Reserve reserveCmd `cmd:"" help:"Reserve ready jobs from one or more topics."`
	Finish  finishCmd  `cmd:"" help:"Finish (delete) a job you reserved."`
	Release releaseCmd `cmd:"" help:"Give back a job you reserved, ready now or after --delay."`
	Touch   touchCmd   `cmd:"" help:"Restart the TTR of a job you reserved."`
	Bury    buryCmd    `cmd:"" help:"Set aside a job you reserved until it is kicked."`
	Delete  deleteCmd  `cmd:"" help:"Delete a job in any state (operator revoke)."`
	Get     getCmd     `cmd:"" help:"Show a job."`
	Update  updateCmd  `cmd:"" help:"Change the due time, body or priority of a job that is not reserved."`
	List    listCmd    `cmd:"" help:"Browse a topic's jobs, a page at a time."`
	Kick    kickCmd    `cmd:"" help:"Retry buried jobs of a topic (--delayed: fire delayed ones early), or kick one job by id, to ready."`
	Topics  topicsCmd  `cmd:"" help:"List topics with their job counts."`
	Stats   statsCmd   `cmd:"" help:"Show the server's health and job counts over all topics."`
	Backup  backupCmd  `cmd:"" help:"Copy a running server's embedded store into a new data directory."`
	Repair  repairCmd  `cmd:"" help:"Salvage a damaged embedded store of a stopped server: keep every readable job, keep the original."`
	Bench   benchCmd   `cmd:"" help:"Measure a delayq or beanstalkd server: put, reserve+delete, firing lateness."`
	Token   tokenCmd   `cmd:"" help:"Make tokens and keep the --auth-file: add, remove, list (delayq token NAME only prints an entry)."`
	Migrate migrateCmd `cmd:"" help:"Create or upgrade the PostgreSQL schema of --postgres, or --print its SQL for a DBA."`

	// Periodic jobs and topic controls (schedules.go, pause.go, policy.go).
	Pause    pauseCmd    `cmd:"" help:"Pause a topic: reserves skip it for --for, or until resumed."`
	Resume   resumeCmd   `cmd:"" help:"Resume a paused topic."`
	Purge    purgeCmd    `cmd:"" help:"Delete every job of a topic in one state (e.g. buried)."`
	Schedule scheduleCmd `cmd:"" help:"Manage periodic jobs: add, list, get, delete, pause, resume."`
	Policy   policyCmd   `cmd:"" help:"Manage a topic's policy: default ttr and max_attempts, retry backoff, max jobs."`

	// Alarms (alarms.go).
	Alarm alarmCmd `cmd:"" help:"Manage webhook alarms: set, list, get, delete."`
}

// env is what every subcommand's Run gets: the context (cancelled on
// SIGINT/SIGTERM by main) and the output writers.
type env struct {
	ctx            context.Context
	stdout, stderr io.Writer
}

// exitPanic carries kong's exit code (after --help or a usage error) out
// of kong.Parse, so Main returns it instead of kong calling os.Exit.
type exitPanic int

// Main runs the delayq command line with args (without the program name)
// and returns the process exit code: 0 on success, 1 when the command
// failed, 2 when the command line was wrong.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exitPanic)
			if !ok {
				panic(r)
			}
			code = int(e)
		}
	}()
	var cli root
	parser := newParser(&cli, stdout, stderr)
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "delayq: %s\n", redact.String(err.Error()))
		return exitUsage
	}
	if err := kctx.Run(&env{ctx: ctx, stdout: stdout, stderr: stderr}); err != nil {
		fmt.Fprintf(stderr, "delayq %s: %s\n", strings.Fields(kctx.Command())[0], redact.String(err.Error())) // an error may quote a setting
		var u usageError
		if errors.As(err, &u) {
			return exitUsage
		}
		if errors.Is(err, errRepairLost) {
			return exitRepairLost
		}
		return exitError
	}
	return exitOK
}

// newParser builds the command line parser over cli. Tests use it to
// walk the model (every serve flag is a config file key).
func newParser(cli *root, stdout, stderr io.Writer) *kong.Kong {
	parser, err := kong.New(cli,
		kong.Name("delayq"),
		kong.Description("delayq is a durable delay queue server. Run `delayq serve`, then put and reserve jobs over HTTP, beanstalkd or these commands."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(c int) { panic(exitPanic(c)) }),
		kong.Vars(defaultVars()),
		kong.Vars(securityVars()),
		kong.Vars(redisVars()),
		kong.Vars(postgresVars()),
		kong.UsageOnError(),
		kong.TypeMapper(reflect.TypeFor[time.Duration](), durationMapper()),
	)
	if err != nil {
		panic(err) // the command tree is wrong: a programming error
	}
	return parser
}

// usageError is a command line that kong accepted but a command refuses
// (two flags that exclude each other).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// defaultVars feeds config.Default into the flags' default tags, so the
// defaults are written once, in package config.
func defaultVars() kong.Vars {
	d := config.Default()
	return kong.Vars{
		"http_addr":          d.HTTPAddr,
		"beanstalk_addr":     d.BeanstalkAddr,
		"data_dir":           d.DataDir,
		"max_body":           strconv.Itoa(d.MaxBody),
		"cache_mib":          strconv.Itoa(d.CacheMiB),
		"hot_mib":            strconv.Itoa(d.HotMiB),
		"min_free_mib":       strconv.Itoa(d.MinFreeMiB),
		"ballast_mib":        strconv.Itoa(d.BallastMiB),
		"max_wait":           d.MaxWait.String(),
		"retain":             d.Retain.String(),
		"retain_bodies":      strconv.FormatBool(d.RetainBodies),
		"max_reserve_topics": strconv.Itoa(d.MaxReserveTopics),
		"shutdown_timeout":   d.ShutdownTimeout.String(),
		"alarm_interval":     d.AlarmInterval.String(),
		"metrics_max_topics": strconv.Itoa(d.MetricsMaxTopics),
		"log_level":          d.LogLevel,
		"log_format":         d.LogFormat,
		"server":             defaultServer,
		"version":            buildinfo.Read().String(),
	}
}

// durationMapper reads durations as every part of delayq does
// (delayq.ParseDuration): Go's units plus "d" for days, so "--delay 7d"
// works as it does over HTTP.
func durationMapper() kong.MapperFunc {
	return func(ctx *kong.DecodeContext, target reflect.Value) error {
		var s string
		if err := ctx.Scan.PopValueInto("duration", &s); err != nil {
			return err
		}
		d, err := delayq.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("expected a duration such as 30s, 1h30m or 7d but got %q", s)
		}
		target.Set(reflect.ValueOf(d))
		return nil
	}
}
