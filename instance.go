package delayq

import "time"

// Instance is one live delayq server of a deployment that shares a Redis
// store, as the store knows it. Front ends put it on the wire (GET
// /v1/cluster), so stores need not know the wire types.
type Instance struct {
	URL       string    // advertised HTTP base URL
	Protocols []string  // "http", "beanstalk"
	Buckets   []int     // timer buckets it leases
	Since     time.Time // when it started; zero if unknown
}
