package api

// PurgeResponse answers DELETE /v1/topics/{topic}/jobs?state=: how many
// jobs were deleted.
type PurgeResponse struct {
	Deleted int `json:"deleted"`
}
