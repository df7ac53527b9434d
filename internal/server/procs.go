package server

import "os"

// backgroundP reports whether the embedded store may raise GOMAXPROCS by
// one while each of its flushes and compactions runs
// (diskstore.Options.BackgroundP): not when the environment sets
// GOMAXPROCS, which is then kept as given.
func backgroundP() bool { return os.Getenv("GOMAXPROCS") == "" }
