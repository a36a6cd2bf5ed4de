package app

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// openDebug serves net/http/pprof on Config.DebugAddr, a listener of its
// own: profiles say too much (and cost too much) to sit on the public port.
// It has no /debug/pprof/cmdline: that showed every secret passed as a
// flag (the _FILE settings keep them off the command line anyway).
func (m *Main) openDebug() error {
	if m.Config.DebugAddr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", m.Config.DebugAddr)
	if err != nil {
		return fmt.Errorf("listen FLASHSALE_DEBUG_ADDR: %w", err)
	}
	m.debugAddr = ln.Addr().String()
	// No write timeout: a CPU profile streams for as long as it was asked.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	m.closers = append(m.closers, srv.Close)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("debug server", "err", err)
		}
	}()
	m.log.Info("pprof listening", "addr", m.debugAddr)
	return nil
}
