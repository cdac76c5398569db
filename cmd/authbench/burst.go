package main

// The burst mode: does a crowd of password sign-ins slow the token
// exchanges of everybody else? The -c workers redeem codes minted ahead
// (as in the exchange mode) for half of -d: the exchange p99 "before".
// Then -burst goroutines each start one full password sign-in (the login
// flow, in a new browser: authorize, password, code, token) at the same
// instant, while the workers go on exchanging: the exchange p99 "during",
// until the last sign-in has finished, which ends the run. The result has
// both p99s and their ratio, and the sign-ins' completion times. Nothing
// here depends on how authd hashes passwords.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"sync"
	"sync/atomic"
	"time"
)

// burstRatioTarget is the bound on exchange p99 during ÷ before.
const burstRatioTarget = 2

// burstState is the burst mode's run state. The times are written by
// runBurst only, and read after it has returned.
type burstState struct {
	phase      atomic.Int32 // 0 before the burst, 1 from its start
	idleStart  time.Time
	burstStart time.Time
	burstEnd   time.Time
	signIns    []*recorder  // one per sign-in
	minted     atomic.Int64 // codes minted in the timed phase (the prepared ones ran out)
}

// burstResult is the burst mode's summary in the JSON result.
type burstResult struct {
	SignIns   int     `json:"sign_ins"`
	SignInsOK int     `json:"sign_ins_ok"`
	IdleS     float64 `json:"idle_s"`
	BurstS    float64 `json:"burst_s"`
	IdleN     int     `json:"exchanges_idle"`
	BurstN    int     `json:"exchanges_burst"`
	// IdleFailed and BurstFailed are exchanges that failed (a timeout, an
	// error): the p99s are of the successful ones only.
	IdleFailed  int     `json:"exchanges_idle_failed,omitempty"`
	BurstFailed int     `json:"exchanges_burst_failed,omitempty"`
	IdleP99     float64 `json:"exchange_p99_idle_ms"`
	BurstP99    float64 `json:"exchange_p99_burst_ms"`
	Ratio       float64 `json:"p99_ratio"`
	SignInP50   float64 `json:"sign_in_p50_ms"`
	SignInP99   float64 `json:"sign_in_p99_ms"`
	SignInMax   float64 `json:"sign_in_max_ms"`
	Minted      int64   `json:"codes_minted_in_run,omitempty"`
}

func checkBurst(o *options) error {
	if err := needPublicClient(true)(o); err != nil {
		return err
	}
	if o.Count > 0 {
		return usagef("-n: -mode burst is timed (half of -d before the burst, then until the sign-ins finish); use -d")
	}
	if o.Burst < 1 || o.Burst > 10000 {
		return usagef("-burst: must be 1..10000")
	}
	return nil
}

// prepareBurst mints the codes, as the exchange mode does.
func prepareBurst(ctx context.Context, r *runner) error {
	r.burst = &burstState{}
	return prepareExchange(ctx, r)
}

// iterBurstExchange redeems the next minted code, timed as "token" before
// the burst and "token-burst" from its start. If the prepared codes ran
// out, it mints one first (not timed) with the worker's signed-in browser.
func iterBurstExchange(ctx context.Context, w *worker) error {
	r := w.r
	var c mintedCode
	if i := r.codeNext.Add(1) - 1; i < int64(len(r.codes)) {
		c = r.codes[i]
	} else {
		code, v, err := w.ssoCode(ctx)
		if err != nil {
			w.rec.record("mint", 0, err)
			return err
		}
		r.burst.minted.Add(1)
		c = mintedCode{code, v}
	}
	name := "token"
	if r.burst.phase.Load() == 1 {
		name = "token-burst"
	}
	return w.step(name, func() error {
		_, err := r.exchangeCode(ctx, c.code, c.verifier)
		return err
	})
}

// runBurst is the timed phase's clock: half of -d, then the burst; the run
// ends when every sign-in has finished.
func runBurst(ctx context.Context, r *runner) {
	b := r.burst
	defer r.stop.Store(true)
	b.idleStart = time.Now()
	t := time.NewTimer(r.o.Duration / 2)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	r.progress.status("\nburst: %d password sign-ins at once", r.o.Burst)
	release := make(chan struct{})
	var wg sync.WaitGroup
	b.signIns = make([]*recorder, r.o.Burst)
	for i := range b.signIns {
		bw := &worker{id: len(r.workers) + i, r: r, rec: newRecorder()}
		b.signIns[i] = bw.rec
		// A sign-in in a burst may queue behind the others' password
		// hashes; a browser waits longer than -timeout for that.
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Transport: r.transport, Jar: jar, CheckRedirect: noRedirect, Timeout: max(r.o.Timeout, time.Minute)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			code, verifier, err := bw.signIn(ctx, browser, false)
			if err == nil {
				_, err = r.exchangeCode(ctx, code, verifier)
			}
			bw.rec.record("signin", time.Since(b.burstStart), err)
		}()
	}
	b.burstStart = time.Now()
	b.phase.Store(1)
	close(release)
	wg.Wait()
	r.stop.Store(true)
	b.burstEnd = time.Now()
}

// finishBurst replaces the steps with the exchanges before and during the
// burst (each over its own phase's length) and the sign-ins, and writes
// the summary.
func finishBurst(r *runner, res *result, merged *recorder) {
	b := r.burst
	if b == nil || b.burstStart.IsZero() {
		res.Note = "the run ended before the burst"
		return
	}
	signIns := newRecorder()
	for _, rec := range b.signIns {
		signIns.merge(rec)
	}
	idleD, burstD := b.burstStart.Sub(b.idleStart), b.burstEnd.Sub(b.burstStart)
	idle, during, si := merged.summary("token", idleD), merged.summary("token-burst", burstD), signIns.summary("signin", burstD)
	res.Steps = []stepResult{idle, during, si}
	for k, v := range signIns.errorCounts() {
		res.Errors[k] += v
	}
	br := &burstResult{
		SignIns: r.o.Burst, SignInsOK: si.OK, IdleS: idleD.Seconds(), BurstS: burstD.Seconds(),
		IdleN: idle.OK, BurstN: during.OK, IdleFailed: idle.Errors, BurstFailed: during.Errors, IdleP99: idle.P99, BurstP99: during.P99,
		SignInP50: si.P50, SignInP99: si.P99, SignInMax: si.Max, Minted: b.minted.Load(),
	}
	if br.IdleP99 > 0 {
		br.Ratio = br.BurstP99 / br.IdleP99
	}
	res.Burst = br
	res.Note = br.note()
}

func (b *burstResult) verdict() string {
	switch {
	case b.Ratio == 0:
		return "no ratio"
	case b.IdleFailed+b.BurstFailed > 0:
		return "missed: exchanges failed"
	case b.Ratio <= burstRatioTarget:
		return "met"
	}
	return "missed"
}

// note is the one-line summary (table, JSON note, report).
func (b *burstResult) note() string {
	s := fmt.Sprintf("exchange p99 %.1f ms before the burst (%.1f s, %d exchanges), %.1f ms during %d concurrent password sign-ins (%.1f s, %d exchanges): ratio %.2f (target ≤ %d: %s); sign-ins finished p50 %.0f ms, p99 %.0f ms, max %.0f ms, %d of %d ok",
		b.IdleP99, b.IdleS, b.IdleN, b.BurstP99, b.SignIns, b.BurstS, b.BurstN, b.Ratio, burstRatioTarget, b.verdict(),
		b.SignInP50, b.SignInP99, b.SignInMax, b.SignInsOK, b.SignIns)
	if b.IdleFailed+b.BurstFailed > 0 {
		s += fmt.Sprintf("; %d exchanges failed before the burst and %d during it (not in the p99s, which are of the successful ones)", b.IdleFailed, b.BurstFailed)
	}
	if b.Minted > 0 {
		s += fmt.Sprintf("; the prepared codes ran out: %d exchanges redeemed a code minted just before (not timed)", b.Minted)
	}
	return s
}

// writeBurstReport adds the burst runs' section to a report.
func writeBurstReport(w io.Writer, results []*result) {
	var rows []*result
	for _, r := range results {
		if r.Burst != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "### Exchanges during a burst of password sign-ins")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| c | sign-ins at once | ok | exchange p99 before ms | exchange p99 during ms | ratio (target ≤ 2) | exchanges/s before | during | exchanges failed before / during | burst s | sign-in p50 ms | p99 ms | max ms |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		b := r.Burst
		fmt.Fprintf(w, "| %d | %d | %d | %.1f | %.1f | **%.2f** (%s) | %.0f | %.0f | %d / %d | %.1f | %.0f | %.0f | %.0f |\n",
			r.Concurrency, b.SignIns, b.SignInsOK, b.IdleP99, b.BurstP99, b.Ratio, b.verdict(),
			rate(b.IdleN, b.IdleS), rate(b.BurstN, b.BurstS), b.IdleFailed, b.BurstFailed, b.BurstS, b.SignInP50, b.SignInP99, b.SignInMax)
	}
	fmt.Fprintln(w)
}

func rate(n int, s float64) float64 {
	if s <= 0 {
		return 0
	}
	return float64(n) / s
}
