package delayq

import "time"

// Limits fixed by the protocols. Configurable limits live in the engine's
// Config.
const (
	MaxNameLen     = 200   // bytes in a topic name or job id
	MaxBodyDefault = 65535 // bytes in a body unless configured (beanstalkd's max-job-size)
	MaxBatch       = 1000  // jobs in one batch put
	MaxReserveN    = 1000  // jobs in one reserve
	MaxWaitDefault = 5 * time.Minute
)

// ValidTopic reports whether name follows beanstalkd's tube rules: 1 to 200
// bytes of letters, digits and -+/;.$_(), not starting with '-'.
func ValidTopic(name string) bool {
	if len(name) == 0 || len(name) > MaxNameLen || name[0] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) && !contains("-+/;.$_()", c) {
			return false
		}
	}
	return true
}

// ValidID reports whether id is 1 to 200 bytes of [A-Za-z0-9_.:-].
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > MaxNameLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !isAlnum(c) && !contains("_.:-", c) {
			return false
		}
	}
	return true
}

// ValidObjectName reports whether name is 1 to max bytes of
// [A-Za-z0-9_.-]: the names of schedules and alarms, safe in a URL path, a
// CLI argument and (without ':') inside a job id.
func ValidObjectName(name string, max int) bool {
	if len(name) == 0 || len(name) > max {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && !contains("_.-", c) {
			return false
		}
	}
	return true
}

// CheckTopic returns a *ValidationError when name is not a valid topic.
func CheckTopic(name string) error {
	if !ValidTopic(name) {
		return Invalid(CodeBadTopic, "topic", "%q is not a valid topic name (1-%d bytes of letters, digits and -+/;.$_(), not starting with -)", clip(name), MaxNameLen)
	}
	return nil
}

// CheckID returns a *ValidationError when id is not a valid job id.
func CheckID(id string) error {
	if !ValidID(id) {
		return Invalid(CodeBadID, "id", "%q is not a valid job id (1-%d bytes of [A-Za-z0-9_.:-])", clip(id), MaxNameLen)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func contains(set string, c byte) bool {
	for i := 0; i < len(set); i++ {
		if set[i] == c {
			return true
		}
	}
	return false
}

// clip keeps error messages short when a name is absurdly long.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
