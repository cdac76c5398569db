package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// options are the flags of a load run.
type options struct {
	// DPoP makes every token request carry a DPoP proof (RFC 9449) from one
	// ES256 key per run, answering use_dpop_nonce as a client does.
	DPoP        bool
	Mode        string
	Target      string
	Concurrency int
	Duration    time.Duration
	Count       int
	Timeout     time.Duration
	JSON        bool
	Quiet       bool
	ServerPID   int
	MetricsURL  string
	Label       string
	AllowRemote bool
	CPUProfile  string

	ClientID     string
	ClientSecret string
	RedirectURI  string
	Scope        string
	User         string
	Password     string
	Pool         int
	MintTime     time.Duration
	// Burst is how many password sign-ins the burst mode starts at once.
	Burst int
	// UpstreamListen and NativeAudience: the token-exchange mode's
	// provider (federation.go).
	UpstreamListen string
	NativeAudience string
}

// loadFlags registers the flags every load run has.
func (o *options) loadFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Target, "target", "http://127.0.0.1:8080", "base URL of the server under test")
	fs.IntVar(&o.Concurrency, "c", 16, "concurrent workers (each a sequential client)")
	fs.DurationVar(&o.Duration, "d", 10*time.Second, "duration of the timed phase (ignored with -n)")
	fs.IntVar(&o.Count, "n", 0, "stop after this many iterations instead of after -d")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.BoolVar(&o.JSON, "json", false, "write the result as JSON to stdout (the table goes to stderr)")
	fs.BoolVar(&o.Quiet, "q", false, "no progress line")
	fs.IntVar(&o.ServerPID, "server-pid", 0, "PID of the server on this machine: check that it is the one listening on -target (and -metrics-url), report its peak RSS (VmHWM, reset at the start) and CPU use")
	fs.StringVar(&o.MetricsURL, "metrics-url", "", "authd's /metrics on its operations listener (e.g. http://127.0.0.1:9090/metrics): report SQL statements, Redis commands and round trips per iteration of the timed phase")
	fs.StringVar(&o.Label, "label", "", "free-form label stored in the JSON result")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write authbench's own CPU profile of the timed phase to this file (what the load generator costs)")
	fs.BoolVar(&o.AllowRemote, "allow-remote", false, "allow a -target that is not a loopback address (never point load at a server you do not own)")
}

// clientFlags registers the OAuth client and user flags.
func (o *options) clientFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ClientID, "client-id", "", "client_id: a public skip_consent client for login/sso/exchange/burst/replay/refresh, a public third-party one for sso-consent, a confidential one for introspect/client-credentials")
	fs.StringVar(&o.ClientSecret, "client-secret", "", "client_secret of a confidential client (sent with HTTP Basic)")
	fs.StringVar(&o.RedirectURI, "redirect-uri", "dev.authd.authbench:/callback", "registered redirect_uri of the public client")
	fs.BoolVar(&o.DPoP, "dpop", false, "send a DPoP proof (RFC 9449, ES256, one key per run) with every token request")
	fs.StringVar(&o.Scope, "scope", "", "scope to request (default \"openid offline_access\" for code flows, none for client-credentials)")
	fs.StringVar(&o.User, "user", "bench", "username for login/sso")
	fs.StringVar(&o.Password, "password", "", "password for login/sso (also read from AUTHBENCH_PASSWORD)")
	fs.IntVar(&o.Pool, "pool", 0, "replay/introspect: distinct codes or tokens cycled through (default: -c)")
	fs.DurationVar(&o.MintTime, "mint-time", 0, "exchange: how long to mint codes ahead when -n is not given (default: -d)")
	fs.IntVar(&o.Burst, "burst", 200, "burst: password sign-ins started at once, halfway through -d")
	fs.StringVar(&o.UpstreamListen, "upstream-listen", "", "token-exchange: host:port on which authbench serves the upstream provider (its issuer is http://HOST:PORT)")
	fs.StringVar(&o.NativeAudience, "native-audience", "dev.authd.authbench", "token-exchange: the aud of the provider ID tokens (one of the provider's native_audiences)")
}

func (o *options) validate() error {
	u, err := url.Parse(o.Target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("-target: %q is not an absolute http(s) URL", o.Target)
	}
	if !o.AllowRemote && !isLoopbackHost(u.Hostname()) {
		return usagef("-target: %q is not a loopback address; load tests run against this machine (use -allow-remote to override)", o.Target)
	}
	o.Target = strings.TrimRight(o.Target, "/")
	if err := o.validateMetricsURL(); err != nil {
		return err
	}
	if o.Concurrency < 1 || o.Concurrency > 4096 {
		return usagef("-c: must be 1..4096")
	}
	if o.Count < 0 {
		return usagef("-n: must not be negative")
	}
	if o.Count == 0 && o.Duration <= 0 {
		return usagef("-d: must be positive (or give -n)")
	}
	if o.Password == "" {
		o.Password = os.Getenv("AUTHBENCH_PASSWORD")
	}
	if o.Pool <= 0 {
		o.Pool = o.Concurrency
	}
	if o.MintTime <= 0 {
		o.MintTime = o.Duration
	}
	return nil
}

// errExhausted ends a worker: no more prepared work (codes) is left.
var errExhausted = errors.New("prepared work exhausted")

// mode is one kind of load.
type mode struct {
	// steps are the step names in table order; "flow" (a whole iteration)
	// is added for modes with more than one step.
	steps []string
	// check validates mode-specific options.
	check func(*options) error
	// prepare runs before the timed phase (minting codes or tokens); it
	// is not timed. It may set per-run state on the runner.
	prepare func(ctx context.Context, r *runner) error
	// iter is one timed iteration by worker w. It records its steps with
	// w.step; a returned error is already recorded, except errExhausted.
	iter func(ctx context.Context, w *worker) error
	// timed, if set, runs beside the workers during the timed phase and
	// ends it itself (sets r.stop): -d starts no timer of its own. The run
	// ends when timed has returned.
	timed func(ctx context.Context, r *runner)
	// finish, if set, adds the mode's own figures to the result.
	finish func(r *runner, res *result, merged *recorder)
}

// runner is one load run: shared HTTP transport, counters, workers.
type runner struct {
	o         *options
	m         mode
	transport *http.Transport
	client    *http.Client // no redirects, no cookies
	stderr    io.Writer
	workers   []*worker
	db        *dbCeiling  // ceiling-db only
	dpop      *dpopClient // with -dpop
	// sample reads the server's backend counters (-metrics-url, or
	// ceiling-db's own pool); nil: none.
	sample func(context.Context) (counterSample, error)

	done     atomic.Int64 // iterations completed (ok or not)
	errs     atomic.Int64 // iterations that failed
	claimed  atomic.Int64 // iterations started (for -n)
	stop     atomic.Bool
	progress progressLine

	// mode state, set by prepare
	codes      []mintedCode
	codeNext   atomic.Int64
	replays    []replayEntry
	tokens     []string
	exhausted  atomic.Bool
	prepStatus string
	oidc       *oidcState  // sso-consent
	burst      *burstState // burst
	fed        *fedState   // token-exchange
}

// worker is one sequential client.
type worker struct {
	id  int
	r   *runner
	rec *recorder
	// browser is this worker's cookie-keeping client (sso, refresh).
	browser *http.Client
	// refresh is the worker's current refresh token (refresh mode).
	refresh string
	n       int
}

func newTransport(c int) *http.Transport {
	return &http.Transport{
		Proxy:               nil, // never send load through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2*c + 16,
		MaxIdleConnsPerHost: 2*c + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// runLoad prepares, runs the timed phase and returns the result.
func runLoad(ctx context.Context, o *options, m mode, stderr io.Writer) (*result, error) {
	return runLoadWith(ctx, o, m, stderr, nil)
}

// runLoadWith is runLoad with a hook that sets up the runner before the
// preparation (ceiling-db hands it the database).
func runLoadWith(ctx context.Context, o *options, m mode, stderr io.Writer, init func(*runner)) (*result, error) {
	r := &runner{o: o, m: m, transport: newTransport(o.Concurrency), stderr: stderr}
	if init != nil {
		init(r)
	}
	r.client = &http.Client{Transport: r.transport, CheckRedirect: noRedirect, Timeout: o.Timeout}
	defer r.transport.CloseIdleConnections()
	if o.DPoP {
		c, err := newDPoPClient()
		if err != nil {
			return nil, err
		}
		// The proofs' htu is the token endpoint the server publishes
		// (RFC 9449 §4.3: compared with the server's own URL), which
		// need not be the -target authbench connects to (bench/run.sh:
		// a localhost issuer served on 127.0.0.1).
		if c.tokenEndpoint, err = r.tokenEndpoint(ctx); err != nil {
			return nil, err
		}
		r.dpop = c
	}
	r.progress = progressLine{w: stderr, quiet: o.Quiet, tty: isTerminal(stderr)}

	workers := make([]*worker, o.Concurrency)
	for i := range workers {
		workers[i] = &worker{id: i, r: r, rec: newRecorder()}
	}
	r.workers = workers
	if m.prepare != nil {
		if err := m.prepare(ctx, r); err != nil {
			return nil, fmt.Errorf("%s: prepare: %w", o.Mode, err)
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if r.sample == nil && o.MetricsURL != "" {
		r.sample = func(ctx context.Context) (counterSample, error) { return scrapeCounters(ctx, r.client, o.MetricsURL) }
	}
	// The counters are read when the timed phase starts and when it ends:
	// the preparation's statements are not the iterations'.
	var before counterSample
	if r.sample != nil {
		var err error
		if before, err = r.sample(ctx); err != nil {
			return nil, fmt.Errorf("backend counters: %w", err)
		}
	}

	srv := startServerStats(o.ServerPID)
	if o.CPUProfile != "" {
		stop, err := startCPUProfile(o.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	loadStart := loadAvg()
	self := cpuTime()
	start := time.Now()
	stopProgress := r.progress.start(o.Mode, o.Concurrency, start, &r.done, &r.errs)
	deadline := time.Time{}
	if o.Count == 0 {
		deadline = start.Add(o.Duration)
		if m.timed == nil {
			t := time.AfterFunc(o.Duration, func() { r.stop.Store(true) })
			defer t.Stop()
		}
	}
	timedDone := make(chan struct{})
	if m.timed != nil {
		go func() { defer close(timedDone); m.timed(ctx, r) }()
	} else {
		close(timedDone)
	}
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			r.stop.Store(true)
		case <-finished:
		}
	}()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(ctx)
		}()
	}
	wg.Wait()
	<-timedDone
	elapsed := time.Since(start)
	var after counterSample
	var sampleErr error
	if r.sample != nil {
		after, sampleErr = r.sample(context.WithoutCancel(ctx))
	}
	close(finished)
	stopProgress()
	selfCPU := cpuTime() - self

	res := &result{
		Mode:        o.Mode,
		Label:       o.Label,
		Target:      o.Target,
		Concurrency: o.Concurrency,
		Started:     start.UTC().Format(time.RFC3339),
		ElapsedS:    elapsed.Seconds(),
		Iterations:  r.done.Load(),
		Failed:      r.errs.Load(),
		Exhausted:   r.exhausted.Load(),
		Prepared:    r.prepStatus,
		GOMAXPROCS:  runtime.GOMAXPROCS(0),
		BenchCPU:    selfCPU.Seconds() / elapsed.Seconds(),
		LoadStart:   loadStart,
		LoadEnd:     loadAvg(),
	}
	if !deadline.IsZero() {
		res.PlannedS = o.Duration.Seconds()
	}
	res.Rate = float64(res.Iterations-res.Failed) / elapsed.Seconds()
	srv.finish(res, elapsed)
	if sampleErr != nil {
		fmt.Fprintf(stderr, "authbench: backend counters at the end: %v\n", sampleErr)
	}
	perIteration(res, before, after)

	merged := newRecorder()
	for _, w := range workers {
		merged.merge(w.rec)
	}
	names := slices.Clone(m.steps)
	if len(names) > 1 {
		names = append(names, "flow")
	}
	for _, name := range names {
		s := merged.summary(name, elapsed)
		if s.OK == 0 && s.Errors == 0 && len(names) > 1 {
			continue // e.g. "consent" for a skip_consent client
		}
		res.Steps = append(res.Steps, s)
	}
	res.Errors = merged.errorCounts()
	if m.finish != nil {
		m.finish(r, res, merged)
	}
	return res, nil
}

// loop runs iterations until the run stops.
func (w *worker) loop(ctx context.Context) {
	r := w.r
	for !r.stop.Load() && ctx.Err() == nil {
		if r.o.Count > 0 && r.claimed.Add(1) > int64(r.o.Count) {
			return
		}
		start := time.Now()
		err := r.m.iter(ctx, w)
		if errors.Is(err, errExhausted) {
			r.exhausted.Store(true)
			return
		}
		if len(r.m.steps) > 1 {
			w.rec.record("flow", time.Since(start), err)
		}
		r.done.Add(1)
		if err != nil {
			r.errs.Add(1)
		}
	}
}

// step times f as the named step and records its outcome.
func (w *worker) step(name string, f func() error) error {
	start := time.Now()
	err := f()
	w.rec.record(name, time.Since(start), err)
	return err
}

// ---- errors ----

// httpError is an unexpected HTTP answer: the status and, for an OAuth
// error response, its "error" code (RFC 6749 §5.2).
type httpError struct {
	status int
	code   string
}

func (e *httpError) Error() string {
	if e.code == "" {
		return strconv.Itoa(e.status)
	}
	return strconv.Itoa(e.status) + " " + e.code
}

// checkError is an answer that was well-formed but wrong (e.g. a replay
// that returned other tokens).
type checkError struct{ what string }

func (e *checkError) Error() string { return e.what }

// errorKey classifies err for the error table without unbounded
// cardinality (no URLs, no tokens).
func errorKey(err error) string {
	var he *httpError
	var ce *checkError
	var ne net.Error
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &he):
		return he.Error()
	case errors.As(err, &pe):
		return "SQLSTATE " + pe.Code
	case errors.Is(err, pgx.ErrNoRows):
		return "no row"
	case errors.As(err, &ce):
		return "check: " + ce.what
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "no local port (EADDRNOTAVAIL)"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		// e.g. the server's WriteTimeout closed the connection
		return "connection closed by the server (EOF)"
	}
	return "transport error"
}

// ---- recording ----

// recorder holds one worker's latencies and errors per step.
type recorder struct {
	steps map[string]*stepRec
}

type stepRec struct {
	lat  []time.Duration // successful requests
	errs map[string]int
}

func newRecorder() *recorder { return &recorder{steps: map[string]*stepRec{}} }

func (r *recorder) get(name string) *stepRec {
	s := r.steps[name]
	if s == nil {
		s = &stepRec{lat: make([]time.Duration, 0, 1024), errs: map[string]int{}}
		r.steps[name] = s
	}
	return s
}

func (r *recorder) record(name string, d time.Duration, err error) {
	s := r.get(name)
	if err != nil {
		s.errs[errorKey(err)]++
		return
	}
	s.lat = append(s.lat, d)
}

func (r *recorder) merge(o *recorder) {
	for name, s := range o.steps {
		d := r.get(name)
		d.lat = append(d.lat, s.lat...)
		for k, v := range s.errs {
			d.errs[k] += v
		}
	}
}

// summary computes one step's row.
func (r *recorder) summary(name string, elapsed time.Duration) stepResult {
	s := r.get(name)
	slices.Sort(s.lat)
	out := stepResult{Step: name, OK: len(s.lat), Rate: float64(len(s.lat)) / elapsed.Seconds()}
	for _, v := range s.errs {
		out.Errors += v
	}
	if len(s.lat) > 0 {
		out.P50 = ms(percentile(s.lat, 50))
		out.P90 = ms(percentile(s.lat, 90))
		out.P99 = ms(percentile(s.lat, 99))
		out.Max = ms(s.lat[len(s.lat)-1])
		var sum time.Duration
		for _, d := range s.lat {
			sum += d
		}
		out.Mean = ms(sum / time.Duration(len(s.lat)))
	}
	return out
}

// errorCounts returns "step: status code" → count.
func (r *recorder) errorCounts() map[string]int {
	out := map[string]int{}
	for name, s := range r.steps {
		if name == "flow" {
			continue
		}
		for k, v := range s.errs {
			out[name+": "+k] += v
		}
	}
	return out
}

// percentile returns the p-th percentile (nearest rank) of sorted d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	rank := int(float64(len(d))*p/100+0.999999) - 1
	rank = max(0, min(rank, len(d)-1))
	return d[rank]
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// ---- results ----

// result is one run, as written by -json.
type result struct {
	Mode        string         `json:"mode"`
	Label       string         `json:"label,omitempty"`
	Target      string         `json:"target"`
	Concurrency int            `json:"concurrency"`
	Started     string         `json:"started"`
	PlannedS    float64        `json:"planned_s,omitempty"`
	ElapsedS    float64        `json:"elapsed_s"`
	Iterations  int64          `json:"iterations"`
	Failed      int64          `json:"failed"`
	Rate        float64        `json:"rate"` // successful iterations per second
	Exhausted   bool           `json:"exhausted,omitempty"`
	Prepared    string         `json:"prepared,omitempty"`
	Steps       []stepResult   `json:"steps"`
	Errors      map[string]int `json:"errors"`
	GOMAXPROCS  int            `json:"gomaxprocs"`
	BenchCPU    float64        `json:"bench_cpu_cores"`
	ServerCPU   float64        `json:"server_cpu_cores,omitempty"`
	ServerHWMkB int64          `json:"server_peak_rss_kb,omitempty"`
	ServerRSSkB int64          `json:"server_rss_kb,omitempty"`
	LoadStart   float64        `json:"loadavg_start"`
	LoadEnd     float64        `json:"loadavg_end"`
	Note        string         `json:"note,omitempty"`
	Burst       *burstResult   `json:"burst,omitempty"`

	// ServerCPUus is the server's CPU time per iteration, in microseconds.
	ServerCPUus float64 `json:"server_cpu_us_per_iter,omitempty"`
	// Per iteration of the timed phase, from the server's counters
	// (-metrics-url; ceiling-db counts its own): absent when unknown.
	DBStatements    *float64 `json:"db_statements_per_iter,omitempty"`
	DBRoundTrips    *float64 `json:"db_round_trips_per_iter,omitempty"`
	RedisCommands   *float64 `json:"redis_commands_per_iter,omitempty"`
	RedisRoundTrips *float64 `json:"redis_round_trips_per_iter,omitempty"`
}

// stepResult is one row of the table; latencies in milliseconds.
type stepResult struct {
	Step   string  `json:"step"`
	OK     int     `json:"ok"`
	Errors int     `json:"errors"`
	Rate   float64 `json:"rate"`
	Mean   float64 `json:"mean_ms"`
	P50    float64 `json:"p50_ms"`
	P90    float64 `json:"p90_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
}

// emit prints the table (stdout, or stderr with -json) and the JSON.
func (o *options) emit(res *result, stdout, stderr io.Writer) error {
	tw := stdout
	if o.JSON {
		tw = stderr
	}
	writeTable(tw, res)
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return nil
}

// writeTable prints the per-step table and the error breakdown.
func writeTable(w io.Writer, res *result) {
	fmt.Fprintf(w, "\n%s  c=%d  %.1fs  %d iterations (%d failed)  %.1f/s", res.Mode, res.Concurrency, res.ElapsedS, res.Iterations, res.Failed, res.Rate)
	if res.Exhausted {
		fmt.Fprint(w, "  [prepared work exhausted before the deadline]")
	}
	fmt.Fprintln(w)
	if res.Prepared != "" {
		fmt.Fprintf(w, "prepared: %s\n", res.Prepared)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\tok\terrors\trate/s\tmean ms\tp50 ms\tp90 ms\tp99 ms\tmax ms\t")
	for _, s := range res.Steps {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", s.Step, s.OK, s.Errors, s.Rate, s.Mean, s.P50, s.P90, s.P99, s.Max)
	}
	tw.Flush()
	if len(res.Errors) > 0 {
		keys := make([]string, 0, len(res.Errors))
		for k := range res.Errors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintln(w, "errors:")
		for _, k := range keys {
			fmt.Fprintf(w, "  %6d  %s\n", res.Errors[k], k)
		}
	}
	if res.Note != "" {
		fmt.Fprintf(w, "note: %s\n", res.Note)
	}
	fmt.Fprintf(w, "load average %.1f → %.1f; authbench CPU %.2f cores", res.LoadStart, res.LoadEnd, res.BenchCPU)
	if res.ServerCPU > 0 {
		fmt.Fprintf(w, "; server CPU %.2f cores (%.0f µs per iteration)", res.ServerCPU, res.ServerCPUus)
	}
	if res.ServerHWMkB > 0 {
		fmt.Fprintf(w, "; server peak RSS %.1f MiB", float64(res.ServerHWMkB)/1024)
	}
	fmt.Fprintln(w)
	if res.DBStatements != nil || res.RedisCommands != nil {
		fmt.Fprintf(w, "per iteration: PostgreSQL %s statements in %s round trips; Redis %s commands in %s round trips\n",
			perIter(res.DBStatements), perIter(res.DBRoundTrips), perIter(res.RedisCommands), perIter(res.RedisRoundTrips))
	}
}

// ---- progress ----

// progressLine prints "mode c=N  12.0s  done 1234  980/s  errors 0" on
// stderr: rewritten in place on a terminal, one line every 5 s otherwise.
type progressLine struct {
	w     io.Writer
	quiet bool
	tty   bool
	mu    sync.Mutex
}

func (p *progressLine) start(label string, c int, start time.Time, done, errs *atomic.Int64) (stop func()) {
	if p.quiet {
		return func() {}
	}
	every := time.Second
	if !p.tty {
		every = 5 * time.Second
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		last, lastT := int64(0), start
		for {
			select {
			case <-quit:
				p.print(label, c, start, done.Load(), errs.Load(), last, lastT, time.Now(), true)
				return
			case now := <-t.C:
				d := done.Load()
				p.print(label, c, start, d, errs.Load(), last, lastT, now, false)
				last, lastT = d, now
			}
		}
	}()
	return func() { close(quit); <-finished }
}

func (p *progressLine) print(label string, c int, start time.Time, done, errs, last int64, lastT, now time.Time, final bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rate := float64(done-last) / now.Sub(lastT).Seconds()
	if final {
		rate = float64(done) / now.Sub(start).Seconds()
	}
	line := fmt.Sprintf("%s c=%d  %5.1fs  done %8d  %8.1f/s  errors %d", label, c, now.Sub(start).Seconds(), done, rate, errs)
	switch {
	case p.tty && final:
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	default:
		fmt.Fprintln(p.w, line)
	}
}

// status prints a one-off line (preparation phases).
func (p *progressLine) status(format string, args ...any) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// ---- CPU and memory ----

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverStats samples another process's CPU time and resets/reads its
// peak RSS through /proc (Linux).
type serverStats struct {
	pid   int
	ticks int64
	ok    bool
}

func startServerStats(pid int) *serverStats {
	s := &serverStats{pid: pid}
	if pid <= 0 {
		return s
	}
	// Writing 5 to clear_refs resets VmHWM to the current RSS, so the peak
	// read at the end is this run's.
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
	s.ticks, s.ok = procTicks(pid)
	return s
}

func (s *serverStats) finish(res *result, elapsed time.Duration) {
	if s.pid <= 0 {
		return
	}
	if t, ok := procTicks(s.pid); ok && s.ok {
		secs := float64(t-s.ticks) / 100 // USER_HZ is 100 on Linux
		res.ServerCPU = secs / elapsed.Seconds()
		if res.Iterations > 0 {
			res.ServerCPUus = secs * 1e6 / float64(res.Iterations)
		}
	}
	res.ServerHWMkB, res.ServerRSSkB = procMem(s.pid)
}

// procTicks returns utime+stime of pid in clock ticks.
func procTicks(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 (1-based).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	return u + st, err1 == nil && err2 == nil
}

// loadAvg returns the 1-minute load average, or 0 where unknown. The
// machine's other work competes with the run for the same cores; results
// record it.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// procMem returns VmHWM and VmRSS of pid in kB.
func procMem(pid int) (hwm, rss int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmHWM":
			hwm = n
		case "VmRSS":
			rss = n
		}
	}
	return hwm, rss
}

// perIter formats a per-iteration count: "–" when unknown.
func perIter(v *float64) string {
	if v == nil {
		return "–"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}

// startCPUProfile writes this process's CPU profile to path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, usagef("-cpuprofile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
