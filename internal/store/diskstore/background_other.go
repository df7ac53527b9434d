//go:build !linux

package diskstore

// lowerThread does nothing where the nice value is not per thread.
func lowerThread(int) {}
