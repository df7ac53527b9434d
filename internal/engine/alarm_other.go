//go:build !linux

package engine

func newAlarm() alarm { return newTimerAlarm() }
