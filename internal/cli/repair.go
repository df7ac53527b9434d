package cli

import (
	"fmt"
	"log/slog"

	"github.com/delayq/delayq/internal/store/diskstore"
)

// repairCmd is `delayq repair DIR`: the offline salvage of a damaged
// embedded store, for when `delayq serve` refuses to start on corruption.
// It never destroys data: the original directory is kept, renamed.
type repairCmd struct {
	Dir string `arg:"" type:"path" help:"Data directory of a stopped server. The repaired store takes its place; the original is kept as DIR.damaged-<time>."`
}

// Run salvages the store, logging progress to stderr, and prints what it
// kept and what it could not read.
func (c *repairCmd) Run(e *env) error {
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	rep, err := diskstore.Repair(e.ctx, c.Dir, diskstore.RepairOptions{Logger: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "repaired %s: kept %s, %s, %s\n", rep.Dir,
		plural(rep.Jobs, "job", "jobs"), plural(rep.Documents, "document", "documents"), plural(rep.Paused, "topic pause", "topic pauses"))
	if rep.WALRecords > 0 {
		fmt.Fprintf(e.stdout, "recovered %s after the damage in the newest WAL\n", plural(rep.WALRecords, "WAL record", "WAL records"))
	}
	if rep.LostCommits > 0 {
		puts := "no job was put in them"
		if rep.LostSeqs > 0 {
			puts = fmt.Sprintf("up to %s put in them (seqs %d-%d) are lost", plural(int(rep.LostSeqs), "job", "jobs"), rep.LostFromSeq, rep.LostToSeq)
		}
		fmt.Fprintf(e.stdout, "dropped: %s the store had acknowledged are missing from its log (it was cut short); %s, and reserves, finishes and deletes in them are undone\n",
			plural(int(rep.LostCommits), "commit", "commits"), puts)
	}
	fmt.Fprintf(e.stdout, "the original is kept unchanged as %s\n", rep.DamagedDir)
	if rep.Clean() {
		fmt.Fprintln(e.stdout, "nothing was unreadable")
		return nil
	}
	fmt.Fprintf(e.stdout, "could not read (%d):\n", len(rep.Damage))
	for _, d := range rep.Damage {
		fmt.Fprintf(e.stdout, "  %s\n", d)
	}
	return nil
}
