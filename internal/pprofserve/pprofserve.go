// Package pprofserve serves Go's profiler on a loopback address, for the
// --pprof flags of envserver and guestd (off unless asked; see
// docs/architecture.md, "Profiling a step").
package pprofserve

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
)

// Serve listens on addr, which must be a loopback address, and serves
// /debug/pprof/ there in the background for the life of the process. It
// returns the address it listens on.
func Serve(addr string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("pprof: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("pprof: %q is not a loopback address (the profiler has no authentication)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go http.Serve(ln, mux) //nolint:errcheck // lives as long as the process
	return ln.Addr().String(), nil
}
