package store

import (
	"context"

	"github.com/delayq/delayq"
)

// Cluster is implemented by stores that several instances share
// (redisstore): through the store each instance advertises itself and
// learns which others are live, for GET /v1/cluster, and instances know
// they share documents and figures (alarms). A store that is not one
// serves a single instance, which is then the whole deployment. The
// server asks for it once, when the store is open.
type Cluster interface {
	// Advertise sets the URL and protocols this instance lists, for
	// servers that learn their address only after the store is open
	// (listen on port 0).
	Advertise(url string, protocols []string)

	// Instances lists the live instances of the deployment, sorted by
	// URL.
	Instances(ctx context.Context) ([]delayq.Instance, error)
}
