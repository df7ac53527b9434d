package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/delayq/delayq/internal/store/diskstore"
)

// repairCmd is `delayq repair DIR`: the offline salvage of a damaged
// embedded store, for when `delayq serve` refuses to start on corruption.
// It never destroys data: the original directory is kept, renamed.
type repairCmd struct {
	Dir string `arg:"" type:"path" help:"Data directory of a stopped server. The repaired store takes its place; the original is kept as DIR.damaged-<time>. Exits 0 when nothing was lost, 3 when the repaired store lacks acknowledged data (named on stdout)."`
}

// errRepairLost ends a repair that wrote the repaired store but lost
// acknowledged data: exit status 3 (exitRepairLost).
var errRepairLost = errors.New("the store is repaired, but it had acknowledged data that could not be kept (named above); the original is kept unchanged")

// lostIDsShown is how many lost job ids the summary prints itself; all of
// them are in the repaired directory's lost-ids.txt.
const lostIDsShown = 20

// Run salvages the store, logging progress to stderr, and prints what it
// kept and what it could not read, each once.
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
		fmt.Fprintln(e.stdout, "nothing was unreadable and nothing was lost")
		return nil
	}
	if len(rep.Damage) > 0 {
		fmt.Fprintf(e.stdout, "DAMAGE: could not read (%d):\n", len(rep.Damage))
		for _, d := range rep.Damage {
			fmt.Fprintf(e.stdout, "  %s\n", d)
		}
	}
	for _, r := range rep.UnreadIDRanges {
		fmt.Fprintf(e.stdout, "lost: jobs whose ids sort %s and that no readable index named (%s)\n", idRange(r), r.Where)
	}
	if n := len(rep.LostIDs); n > 0 {
		shown := rep.LostIDs[:min(n, lostIDsShown)]
		more := ""
		if n > len(shown) {
			more = fmt.Sprintf(" … and %d more", n-len(shown))
		}
		fmt.Fprintf(e.stdout, "lost: %s by id, all listed in %s: %s%s\n", plural(n, "job", "jobs"), rep.LostIDsFile, strings.Join(shown, " "), more)
	}
	return errRepairLost
}

// idRange says which ids r holds.
func idRange(r diskstore.IDRange) string {
	switch {
	case r.After == "" && r.Before == "":
		return "anywhere"
	case r.After == "":
		return fmt.Sprintf("before %q", r.Before)
	case r.Before == "":
		return fmt.Sprintf("after %q", r.After)
	}
	return fmt.Sprintf("after %q and before %q", r.After, r.Before)
}
