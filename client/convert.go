package client

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
