package server

import "os"

// backgroundNice is the nice value of the embedded store's flush and
// compaction threads (diskstore.Options.BackgroundNice): the lowest
// priority, so that on a busy machine the kernel runs the requests and
// the timer first and a flush in what they leave.
const backgroundNice = 19

// backgroundP reports whether the embedded store may raise GOMAXPROCS by
// one while each of those jobs runs (diskstore.Options.BackgroundP): not
// when the environment sets GOMAXPROCS, which is then kept as given.
func backgroundP() bool { return os.Getenv("GOMAXPROCS") == "" }
