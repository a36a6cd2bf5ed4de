// Package http is the JSON API over flashsale.Service: routing, user and
// admin authentication, decoding of untrusted input and the one map from
// error codes to statuses. It holds no business rules; every decision about
// stock, limits and tokens is the service's.
package http

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/api"
	"github.com/golang-jwt/jwt/v5"
	dto "github.com/prometheus/client_model/go"
)

// Config configures a Server.
type Config struct {
	// JWTSecret verifies (and, in demo mode, signs) user tokens with HS256.
	// When empty every user request is unauthenticated: the server fails closed.
	JWTSecret []byte
	// JWKS, when set, verifies the platform identity provider's RS256,
	// ES256 and EdDSA user tokens by their kid (see auth.go). JWTIssuer
	// and JWTAudience, when set, are required of every user token's iss
	// and aud, HS256 included (the demo login puts them in its tokens).
	JWKS        KeySet
	JWTIssuer   string
	JWTAudience string
	// AdminToken is the operators' bearer token for the admin routes, and
	// PaymentToken the payment service's, allowed only to confirm payments
	// and read orders. Each may be a comma-separated list, so a token is
	// rotated by adding the new one, moving callers, then removing the
	// old. Without a PaymentToken the admin token confirms payments too;
	// with no AdminToken the admin routes reject every request.
	AdminToken   string
	PaymentToken string
	// Demo registers POST /api/demo/login, which hands out user tokens to
	// anyone. Never enable it in production.
	Demo bool
	// RequestTimeout is every request's deadline (default
	// RequestTimeoutDefault): a dependency that stalls is answered 503
	// within it, never a hang until the client gives up.
	RequestTimeout time.Duration
	// Limiter counts ReadPerIP, the limit on the sale list, the public
	// sale view and order polling per client address (nil: no limit).
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client (see clientIP), for this limit and the funnel's per-address
	// purchase limit.
	Limiter        flashsale.Limiter
	ReadPerIP      flashsale.Rate
	TrustedProxies []netip.Prefix
	// StreamsPerClient caps the guests' event streams one client address
	// holds open on this instance; beyond it a stream is a 429 and the
	// page polls instead. 0: no cap.
	StreamsPerClient int
	// Route, when set, is asked once per route pattern for the function
	// each request's latency is reported to (metrics); "unmatched" names
	// what no route matched.
	Route func(pattern string) func(time.Duration)
	// Metrics serves GET /metrics; nil answers it 404 (the metrics are
	// off, or on a listener of their own).
	Metrics http.Handler
	// Gather reads the metrics registry, for the figures of the
	// operators' stream (adminstream.go); nil: the stream carries none.
	Gather func() ([]*dto.MetricFamily, error)
	// Now is the clock for token expiry; time.Now when nil.
	Now func() time.Time
	// Logger receives internal errors; discarded when nil.
	Logger *slog.Logger
	// AccessLog, when set, counts every request and logs some
	// (accesslog.go); nil: no access log.
	AccessLog *AccessLog
}

// Defaults for Config.
const (
	RequestTimeoutDefault = time.Second
	// readyTimeout bounds /readyz on its own, shorter than a request: a
	// load balancer's probe must learn "not ready" before it gives up.
	readyTimeout = 250 * time.Millisecond
)

// Server serves the API. It is safe for concurrent use.
type Server struct {
	timeout   time.Duration
	svc       flashsale.Service
	admin     [][]byte
	payment   [][]byte // empty: the admin tokens confirm payments
	secret    []byte
	demo      bool
	now       func() time.Time
	log       *slog.Logger
	parser    *jwt.Parser
	users     *userCache
	jwks      KeySet
	issuer    string
	audience  string
	limiter   flashsale.Limiter
	readPerIP flashsale.Rate
	// streamsPerClient: Config.StreamsPerClient.
	streamsPerClient int
	// trustedProxies: see clientIP.
	trustedProxies []netip.Prefix
	mux            *http.ServeMux
	observers      map[string]func(time.Duration) // by route pattern: its latency (Config.Route)
	// observePurchase is observers[purchaseRoute], for answerSoldOut.
	observePurchase func(time.Duration)
	handler         http.Handler
	metrics         http.Handler
	gather          func() ([]*dto.MetricFamily, error)
	access          *AccessLog
	// fastPurchase and fastToken are fastRoute's handlers, bound once: a
	// method value made per request is an allocation per request.
	fastPurchase, fastToken idHandler
}

// NewServer returns a Server over svc.
func NewServer(svc flashsale.Service, cfg Config) *Server {
	s := &Server{
		svc:       svc,
		timeout:   cmp.Or(cfg.RequestTimeout, RequestTimeoutDefault),
		admin:     tokenList(cfg.AdminToken),
		payment:   tokenList(cfg.PaymentToken),
		secret:    cfg.JWTSecret,
		demo:      cfg.Demo,
		now:       cfg.Now,
		log:       cfg.Logger,
		jwks:      cfg.JWKS,
		issuer:    cfg.JWTIssuer,
		audience:  cfg.JWTAudience,
		limiter:   cfg.Limiter,
		readPerIP: cfg.ReadPerIP,
		mux:       http.NewServeMux(),
		metrics:   cfg.Metrics,
		gather:    cfg.Gather,
		access:    cfg.AccessLog,

		trustedProxies:   cfg.TrustedProxies,
		streamsPerClient: cfg.StreamsPerClient,
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.users = newUserCache(userCacheSize, s.now)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	methods := []string{"HS256"}
	if s.jwks != nil {
		methods = append(methods, platformMethods...)
	}
	s.parser = jwt.NewParser(
		jwt.WithValidMethods(methods),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(s.now),
	)
	var patterns []string
	for _, rt := range s.routes() {
		s.mux.HandleFunc(rt.pattern, rt.handler)
		patterns = append(patterns, rt.pattern)
	}
	s.mux.HandleFunc("/", s.handleNoRoute)
	s.observers = map[string]func(time.Duration){}
	if cfg.Route != nil {
		for _, p := range append(patterns, unmatchedRoute) {
			if !isStreamRoute(p) {
				// A stream lasts as long as its guest watches: its
				// length is no latency, and would swamp the p99.
				s.observers[p] = cfg.Route(p)
			}
		}
	}
	s.observePurchase = s.observers[purchaseRoute]
	if s.access != nil {
		s.access.register(patterns)
	}
	s.fastPurchase, s.fastToken = s.purchase, s.issueToken
	s.handler = http.HandlerFunc(s.serveHTTP)
	return s
}

// Handler returns the API's root handler.
func (s *Server) Handler() http.Handler { return s.handler }

// route is one line of the routing table.
type route struct {
	pattern string
	handler http.HandlerFunc
}

// routes is the single routing table. Admin routes are wrapped in
// requireAdmin here, so a route cannot be added without deciding who may
// call it; user routes authenticate inside the handler because they need
// the user.
func (s *Server) routes() []route {
	hub := newEventHub(s)
	rs := []route{
		{"POST /api/admin/sales", s.requireAdmin(s.handleCreateSale)},
		{"GET /api/admin/sales", s.requireAdmin(s.handleListSales)},
		{"GET /api/admin/sales/{id}", s.requireAdmin(s.handleAdminSale)},
		{"PATCH /api/admin/sales/{id}", s.requireAdmin(s.handleUpdateSale)},
		{"DELETE /api/admin/sales/{id}", s.requireAdmin(s.handleDeleteSale)},
		{"POST /api/admin/sales/{id}/pause", s.requireAdmin(s.handleSaleAction(pauseSale))},
		{"POST /api/admin/sales/{id}/resume", s.requireAdmin(s.handleSaleAction(resumeSale))},
		{"POST /api/admin/sales/{id}/close", s.requireAdmin(s.handleSaleAction(closeSale))},
		{"POST /api/admin/sales/{id}/nights/{date}/stock", s.requireAdmin(s.handleAdjustStock)},
		{"PATCH /api/admin/sales/{id}/nights/{date}", s.requireAdmin(s.handleNightRules)},
		{"GET /api/admin/sales/{id}/changes", s.requireAdmin(s.handleSaleChanges)},
		{"GET /api/admin/sales/{id}/orders", s.requireAdmin(s.handleSaleOrders)},
		{"POST /api/admin/sales/{id}/preheat", s.requireAdmin(s.handlePreheat)},
		{"GET /api/admin/sales/{id}/audit", s.requireAdmin(s.handleAudit)},
		{adminStreamRoute, s.requireAdmin(newAdminStream(s, s.gather).handleStream)},
		{"POST /api/admin/sales/{id}/audit/repair", s.requireAdmin(s.handleRepairAudit)},
		{"GET /api/admin/sales/{id}/queue", s.requireAdmin(s.handleQueueReport)},
		{"GET /api/admin/events", s.requireAdmin(s.handleNoticeStatus)},
		{"GET /api/admin/events/deliveries", s.requireAdmin(s.handleDeliveries)},
		{"GET /api/admin/breaker", s.requireAdmin(s.handleBreaker)},
		{"POST /api/admin/breaker", s.requireAdmin(s.handleForceBreaker)},

		{"GET /api/sales", s.handleSales},
		{"GET /api/sales/{id}", s.handlePublicSale},
		{eventsRoute, hub.handleEvents},
		{"POST /api/sales/{id}/challenge", s.handleChallenge},
		{"POST /api/sales/{id}/queue", s.handleJoinQueue},
		{"GET /api/sales/{id}/queue", s.handleQueueStatus},
		{"GET /api/sales/{id}/queue/draw", s.handleQueueDraw},
		{"GET /api/sales/{id}/queue/events", hub.handleQueueEvents},
		{tokenRoute, withID(s.issueToken)},
		{purchaseRoute, withID(s.purchase)},

		{"GET /api/orders/{id}", s.handleOrder},
		{"POST /api/orders/{id}/cancel", s.handleCancel},
		{"POST /api/orders/{id}/paid", s.requirePayment(s.handlePaid)},

		{"GET /healthz", s.handleHealthz},
		{"GET /readyz", s.handleReadyz},
		{"GET /metrics", s.handleMetrics},
		{"GET /api/openapi.yaml", s.handleOpenAPI},
	}
	if s.demo {
		rs = append(rs, route{"POST /api/demo/login", s.handleDemoLogin})
		rs = append(rs, route{"POST /api/demo/orders/{id}/pay", s.handleDemoPay})
	}
	return rs
}

// adminTimeout is the operators' deadline. The request deadline is sized
// for a guest's purchase; an operator pausing a sale or taking back rooms
// does it in the storm, when the database and the engine answer slowest,
// and a 503 then takes the sale out of their hands exactly when they need
// it. Only the admin token gets past the route's first check, so the
// longer wait is not a guest's to spend.
const adminTimeout = 10 * time.Second

// serveHTTP answers a purchase of a sale known sold out at once
// (answerSoldOut). Any other request it gives its id and deadline (not
// the event stream, which bounds its own reads and writes), routes it,
// times it once for the route's latency and the access log, and recovers
// from handler panics with a JSON 500.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h, id := s.fastRoute(r)
	if r.Pattern == purchaseRoute {
		if s.answerSoldOut(w, r, id) {
			d := time.Since(start)
			if s.observePurchase != nil {
				s.observePurchase(d)
			}
			if s.access != nil {
				s.access.record(r, w, purchaseRoute, http.StatusConflict, d)
			}
			return
		}
	}
	stream, timeout := isEventStream(r), s.timeout
	switch {
	case stream:
		timeout = 0
	case timeout < adminTimeout && strings.HasPrefix(r.URL.Path, "/api/admin/"):
		timeout = adminTimeout
	}
	c := newRequestCtx(r.Context(), timeout)
	defer c.release()
	c.identify(w, r)
	r = r.WithContext(c)
	if _, ok := r.Header["Authorization"]; ok {
		// An answer to a bearer is that bearer's (an order, the admin
		// views): no cache on the way may keep it for someone else.
		w.Header()["Cache-Control"] = noStore
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.writeError(w, r, fmt.Errorf("panic: %v", v))
		}
	}()
	if stream {
		// Neither counted nor timed: its length is a guest watching.
		s.mux.ServeHTTP(w, r)
		return
	}
	var sw *statusWriter
	if s.access != nil {
		sw = newStatusWriter(w)
		w = sw
	}
	// Not deferred: a handler's panic is answered and logged as a 500
	// above, and a count here would call it a 200.
	if h != nil {
		h(w, r, id)
	} else {
		s.mux.ServeHTTP(w, r)
	}
	d := time.Since(start)
	pattern := r.Pattern
	if pattern == "" || pattern == "/" {
		pattern = unmatchedRoute
	}
	if observe := s.observers[pattern]; observe != nil {
		observe(d)
	}
	if sw != nil {
		s.access.finish(sw, r, pattern, d)
	}
}

// The two routes a sale's opening second is made of, a token and a
// purchase per guest, are matched by hand before the ServeMux, whose
// pattern matching (and the request's path-value map it fills) cost the
// sold-out answer about 4% of its CPU (docs/benchmarks.md). Only a path the
// mux would match unchanged is taken: a clean, unescaped
// /api/sales/{id}/purchase or /token with a POST; everything else, 405s and
// redirects included, is the mux's.
const (
	// purchaseRoute is also the route whose latency buckets the
	// operators' stream carries.
	purchaseRoute = "POST /api/sales/{id}/purchase"
	tokenRoute    = "POST /api/sales/{id}/token"
)

// idHandler is a handler given its {id} path value.
type idHandler func(w http.ResponseWriter, r *http.Request, id string)

// fastRoute returns the handler of a purchase or token request and its
// sale id, and sets r.Pattern as the mux would; nil for anything else.
func (s *Server) fastRoute(r *http.Request) (idHandler, string) {
	pattern, id := hotRoute(r)
	switch pattern {
	case purchaseRoute:
		r.Pattern = pattern
		return s.fastPurchase, id
	case tokenRoute:
		r.Pattern = pattern
		return s.fastToken, id
	}
	return nil, ""
}

// hotRoute returns the route of a purchase or token request the mux would
// match unchanged, and its sale id; "" for anything else. It only reads r.
func hotRoute(r *http.Request) (pattern, id string) {
	if r.Method != http.MethodPost || r.URL.RawPath != "" {
		return "", ""
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/sales/")
	if !ok {
		return "", ""
	}
	i := strings.IndexByte(rest, '/')
	if i <= 0 {
		return "", ""
	}
	id = rest[:i]
	if id == "." || id == ".." {
		return "", ""
	}
	switch rest[i:] {
	case "/purchase":
		return purchaseRoute, id
	case "/token":
		return tokenRoute, id
	}
	return "", ""
}

// answerSoldOut answers a purchase of a sale the service knows is sold
// out (flashsale.Service.RefuseSoldOut) before the request is given its
// context and deadline, and before the guest's token and body are looked
// at: most of a sale's requests come after its last room, and this answer
// does no I/O and waits on nothing. A purchase with an Idempotency-Key
// goes the whole way: its retry must find the order it already has.
func (s *Server) answerSoldOut(w http.ResponseWriter, r *http.Request, saleID string) bool {
	if _, keyed := r.Header["Idempotency-Key"]; keyed || !s.svc.RefuseSoldOut(r.Context(), saleID) {
		return false
	}
	w.Header()[requestIDHeader] = requestIDValue(r)
	s.writeError(w, r, flashsale.ErrSoldOut)
	return true
}

// handleNoRouteFound is the 404 of a path no route serves.
func (s *Server) handleNoRouteFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, flashsale.Errorf(flashsale.ENotFound, "no route for %s %s", r.Method, r.URL.Path))
}

// probeMethods are the methods tried when a path matched no route.
var probeMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}

// handleNoRoute answers what no route matched, registered as "/" so the
// mux's plain-text 404 and 405 never reach a client. It tells 404 from 405
// by asking the mux which other methods the path has; only unmatched
// requests pay for that, the routed ones pay nothing.
func (s *Server) handleNoRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range probeMethods {
		if m == r.Method {
			continue
		}
		probe := r.WithContext(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		s.handleNoRouteFound(w, r)
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	s.writeError(w, r, errMethodNotAllowed)
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, statusBody{Status: "ok"})
}

// handleReadyz answers 200 when the instance can sell and 503 when it
// cannot, with what each dependency said, the schema, the sales missing
// from the engine, the breaker's state and the reasons in the body either
// way: the load balancer reads the status, the operator the body.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	rd := s.svc.Ready(ctx)
	status := http.StatusOK
	switch {
	case !rd.Ready:
		// Not ready is an expected state, not an internal error: log the
		// cause and answer 503 so the load balancer stops sending traffic.
		s.log.WarnContext(r.Context(), "not ready", "reasons", rd.Reasons,
			"engine_err", rd.EngineErr, "database_err", rd.DatabaseErr, "migrations_err", rd.MigrationsErr)
		status = http.StatusServiceUnavailable
		w.Header()["Retry-After"] = retryAfter
	case rd.DatabaseErr != nil:
		s.log.WarnContext(r.Context(), "ready without the database: orders wait in the queue", "err", rd.DatabaseErr)
	}
	writeJSON(w, status, rd)
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if s.metrics == nil {
		s.handleNoRouteFound(w, r)
		return
	}
	s.metrics.ServeHTTP(w, r)
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	w.Write(api.OpenAPI)
}

type statusBody struct {
	Status string `json:"status"`
}

// errMethodNotAllowed is the one error whose code is not a flashsale code:
// 405 is about the route table, not the domain.
var errMethodNotAllowed = &flashsale.Error{Code: EMethodNotAllowed, Message: "method not allowed for this route"}

// eventsRoute is the sale's event stream, the one route not timed.
const eventsRoute = "GET /api/sales/{id}/events"
