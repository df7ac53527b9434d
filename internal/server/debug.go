package server

import (
	"net/http"
	"net/http/pprof"
)

// debugHandler serves Go's profiler. It is built on its own mux rather
// than through net/http/pprof's import side effect, so the profiler never
// appears on http.DefaultServeMux or on the API port.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
