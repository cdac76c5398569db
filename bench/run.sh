#!/usr/bin/env bash
# bench/run.sh — the whole benchmark in one go, on this machine only.
#
# Builds authd and authbench, creates a fresh PostgreSQL database and uses a
# Redis database of its own, starts "authd serve" on PostgreSQL + Redis with
# the replay cache, runs every authbench mode at each concurrency, plus the
# two reference ceilings (a fixed-JSON HTTP handler, and the exchange's SQL
# driven from Go), records authd's peak RSS per run, and writes the Markdown
# table to bench/results/<date>.md (raw JSON next to it). Everything it
# creates is removed at the end; all traffic goes to 127.0.0.1, on ports
# free when the script starts; every run first checks (authbench
# -server-pid) that the process answering is the one this script started.
# The passkey mode signs in with a software authenticator (ES256) where
# login types the password (argon2id); the challenge mode does the same at
# the authorization challenge endpoint (a first-party app's native
# sign-in, no browser).
# Per iteration, the table also has authd's CPU time and the SQL statements,
# Redis commands and round trips it sent (its /metrics counters, read when
# each timed phase starts and ends).
#
# Settings (environment):
#   BENCH_DURATION     per run (default 20s)
#   BENCH_CONCURRENCY  list (default "16 64")
#   BENCH_MODES        list (default: every mode)
#   BENCH_PG           PostgreSQL server URL without database (default postgres://postgres@127.0.0.1:5432)
#   BENCH_PG_PARAMS    query string for authd's database URL (default sslmode=disable)
#   BENCH_REDIS_DB     Redis database number used by authd (default 9)
#   BENCH_LOG_LEVEL    authd's AUTHD_LOG_LEVEL (default info, as in production)
#   BENCH_PROFILE      if 1, also take a CPU profile of authd during each run
#                      (bench/results/<date>/<mode>-c<c>.cpu.pprof; AUTHD_PPROF=on)
#   BENCH_WAIT_IDLE    seconds to wait, before each run, for the machine's 1-minute
#                      load average to drop below 1.5 per CPU (default 30; 0: never)
#   BENCH_TOKEN_RATE_LIMIT  authd's per-client token rate limit (default 0: off,
#                      since every request of a mode comes from one client_id)
#   BENCH_BURST        password sign-ins started at once by the burst mode (default 200)
#   BENCH_BURST_CONCURRENCY  the concurrencies at which the burst mode runs (default 16)
#   BENCH_CEILINGS     if 0, skip the two reference ceilings (a quick look at
#                      some modes; the ratio columns stay empty)
#   BENCH_AUTHD        an authd binary to run instead of building this tree's
#                      (bench/compare.sh runs two revisions this way)
#   BENCH_AUTHBENCH    likewise for authbench
#   BENCH_OUT          where results go (default bench/results)
#   BENCH_REV          the revision the report names (default this tree's)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${BENCH_DURATION:-20s}
CONCURRENCY=${BENCH_CONCURRENCY:-16 64}
MODES=${BENCH_MODES:-login passkey challenge sso sso-https sso-consent exchange burst exchange-dpop token-exchange replay replay-dpop refresh introspect client-credentials}
BURST=${BENCH_BURST:-200}
BURST_CONCURRENCY=${BENCH_BURST_CONCURRENCY:-16}
PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
PG_PARAMS=${BENCH_PG_PARAMS:-sslmode=disable}
REDIS_DB=${BENCH_REDIS_DB:-9}
LOG_LEVEL=${BENCH_LOG_LEVEL:-info}

stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
db="authbench_$(date -u +%Y%m%d%H%M%S)_$$"
work=$(mktemp -d)
out=${BENCH_OUT:-bench/results}
raw="$out/$stamp"
mkdir -p "$raw"

log() { printf '==> %s\n' "$*" >&2; }

authd_pid=""
ceil_pid=""
cleanup() {
	set +e
	[ -n "$authd_pid" ] && kill "$authd_pid" 2>/dev/null && wait "$authd_pid" 2>/dev/null
	[ -n "$ceil_pid" ] && kill "$ceil_pid" 2>/dev/null && wait "$ceil_pid" 2>/dev/null
	psql "$PG/postgres?sslmode=disable" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1
	redis-cli -h 127.0.0.1 -n "$REDIS_DB" --scan --pattern 'authd:xc:*' 2>/dev/null | xargs -r -n 500 redis-cli -h 127.0.0.1 -n "$REDIS_DB" del >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

log "building authd and authbench"
if [ -n "${BENCH_AUTHD:-}" ]; then cp "$BENCH_AUTHD" "$work/authd"; else go build -o "$work/authd" ./cmd/authd; fi
if [ -n "${BENCH_AUTHBENCH:-}" ]; then cp "$BENCH_AUTHBENCH" "$work/authbench"; else go build -o "$work/authbench" ./cmd/authbench; fi

# Ports free now (authd, its operations listener, the HTTP ceiling): never
# someone else's server. Should another process take one before it is bound,
# the server checks below (and in every run) say so.
mapfile -t ports < <("$work/authbench" free-port -n 4)
ADDR=127.0.0.1:${ports[0]}
OPS_ADDR=127.0.0.1:${ports[1]}
CEIL_ADDR=127.0.0.1:${ports[2]}
# The upstream OpenID provider authbench serves in the token-exchange mode.
UPSTREAM_ADDR=127.0.0.1:${ports[3]}
METRICS_URL=http://$OPS_ADDR/metrics

log "fresh database $db, Redis database $REDIS_DB"
psql "$PG/postgres?sslmode=disable" -qc "CREATE DATABASE $db"
export AUTHD_DATABASE_URL="$PG/$db?$PG_PARAMS"
export AUTHD_REDIS_URL="redis://127.0.0.1:6379/$REDIS_DB"
AUTHD_SECRET=$(head -c 48 /dev/urandom | base64 | tr -d '\n')
export AUTHD_SECRET
export AUTHD_ADDR=$ADDR
# A domain-name issuer: browsers refuse WebAuthn on an IP address, so authd
# offers passkeys (the passkey mode) only on a name. localhost is 127.0.0.1.
export AUTHD_ISSUER=http://localhost:${ports[0]}
export AUTHD_LOG_LEVEL=$LOG_LEVEL
# The replay window must outlast a timed run (the replay mode repeats
# exchanges made just before it); codes must outlast minting + exchanging.
export AUTHD_REPLAY_WINDOW=5m
export AUTHD_CODE_TTL=5m
export AUTHD_TOKEN_RATE_LIMIT=${BENCH_TOKEN_RATE_LIMIT:-0}
export AUTHD_SIGNIN_RATE_LIMIT=0 # the passkey mode asks for options every iteration from one address
# /readyz, /metrics and pprof are on the operations listener.
export AUTHD_OPS_ADDR=$OPS_ADDR
PPROF_ADDR=$OPS_ADDR
[ "${BENCH_PROFILE:-0}" = 1 ] && export AUTHD_PPROF=on

"$work/authd" migrate up >&2
password=$(head -c 18 /dev/urandom | base64 | tr -d '\n/+=')
printf '%s\n' "$password" | "$work/authd" users add bench >&2
client_id() { sed -n 's/.*"client_id": *"\([^"]*\)".*/\1/p' | head -1; }
public=$("$work/authd" clients add <<'EOF' | client_id
{"client_name": "authbench (public, first-party)", "redirect_uris": ["dev.authd.authbench:/callback", "https://authbench.example/callback"],
 "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"],
 "response_types": ["code"], "scope": "openid offline_access", "skip_consent": true,
 "id_token_signed_response_alg": "ES256"}
EOF
)
# A third-party app (sso-consent): public, PKCE, no skip_consent (the user
# allows it once on the consent page), ES256 ID tokens; its https redirect
# gets a returning user's code silently (RFC 8252 §8.6).
third=$("$work/authd" clients add <<'EOF' | client_id
{"client_name": "authbench (public, third-party)", "redirect_uris": ["https://authbench.example/callback"],
 "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"],
 "response_types": ["code"], "scope": "openid offline_access", "id_token_signed_response_alg": "ES256"}
EOF
)
svc_json=$("$work/authd" clients add <<'EOF'
{"client_name": "authbench (confidential service)", "token_endpoint_auth_method": "client_secret_basic",
 "grant_types": ["client_credentials"], "scope": "api"}
EOF
)
service=$(printf '%s' "$svc_json" | client_id)
service_secret=$(printf '%s' "$svc_json" | sed -n 's/.*"client_secret": *"\([^"]*\)".*/\1/p')
# The native app of the token-exchange mode (RFC 8693) and its provider:
# authbench serves the provider's discovery and keys on $UPSTREAM_ADDR.
# Registered only for that mode (bench/compare.sh runs revisions without it).
native=none
case " $MODES " in *" token-exchange "*)
native=$("$work/authd" clients add <<'EOF' | client_id
{"client_name": "authbench (native sign-in)", "redirect_uris": ["dev.authd.authbench:/callback"],
 "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:token-exchange"],
 "response_types": ["code"], "scope": "openid offline_access email", "id_token_signed_response_alg": "ES256"}
EOF
)
"$work/authd" providers add >/dev/null <<EOF
{"id": "bench", "kind": "oidc", "issuer": "http://$UPSTREAM_ADDR", "client_id": "authbench", "display_name": "authbench",
 "native_audiences": ["dev.authd.authbench"]}
EOF
;;
esac
# The first-party app of the challenge mode (first_party; skip_consent for
# the untimed browser sign-in that adds its passkeys). Registered only for
# that mode (bench/compare.sh runs revisions without first_party).
firstparty=none
case " $MODES " in *" challenge "*)
firstparty=$("$work/authd" clients add <<'EOF' | client_id
{"client_name": "authbench (first-party native app)", "redirect_uris": ["dev.authd.authbench:/callback"],
 "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"],
 "response_types": ["code"], "scope": "openid offline_access", "skip_consent": true, "first_party": true,
 "id_token_signed_response_alg": "ES256"}
EOF
)
;;
esac
[ -n "$firstparty" ] && [ -n "$public" ] && [ -n "$third" ] && [ -n "$service" ] && [ -n "$service_secret" ] && [ -n "$native" ] || { echo "client registration failed" >&2; exit 1; }

log "starting authd serve on $ADDR (PostgreSQL + Redis, replay cache on, log level $LOG_LEVEL)"
"$work/authd" serve 2>"$work/authd.log" &
authd_pid=$!
for _ in $(seq 1 100); do
	kill -0 "$authd_pid" 2>/dev/null || { cat "$work/authd.log" >&2; echo "authd serve exited" >&2; exit 1; }
	curl -fsS "http://$OPS_ADDR/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -fsS "http://$OPS_ADDR/readyz" >/dev/null || { cat "$work/authd.log" >&2; exit 1; }
"$work/authbench" check-server -q -pid "$authd_pid" "http://$ADDR" "$METRICS_URL" || { cat "$work/authd.log" >&2; exit 1; }

log "starting the HTTP ceiling server on $CEIL_ADDR"
"$work/authbench" ceiling-http -serve-only -listen "$CEIL_ADDR" >/dev/null &
ceil_pid=$!
for _ in $(seq 1 50); do
	"$work/authbench" check-server -q -pid "$ceil_pid" "$CEIL_ADDR" 2>/dev/null && break
	kill -0 "$ceil_pid" 2>/dev/null || break
	sleep 0.1
done
"$work/authbench" check-server -q -pid "$ceil_pid" "$CEIL_ADDR"

# wait_idle gives other work on the machine a moment to finish: every run
# shares the same cores. The load average is recorded in each result.
wait_idle() {
	local limit=${BENCH_WAIT_IDLE:-30} max
	# The previous run's dirty buffers are written now, not by a
	# checkpoint in the middle of the next run.
	psql "$PG/$db?sslmode=disable" -qc CHECKPOINT >/dev/null 2>&1 || true
	max=$(awk -v n="$(nproc)" 'BEGIN { print n * 1.5 }')
	for _ in $(seq 1 $((limit / 2))); do
		awk -v m="$max" '{ exit !($1 < m) }' /proc/loadavg && return 0
		sleep 2
	done
}

bench() { # name c args...
	local name=$1 c=$2 prof=""
	shift 2
	local authd=1
	case $name in ceiling-http*) authd=0 ;; esac
	# Every authd run reads authd's statement and command counters.
	if [ $authd = 1 ]; then set -- "$@" -metrics-url "$METRICS_URL"; fi
	wait_idle
	log "$name c=$c ($DURATION, load average $(cut -d' ' -f1 /proc/loadavg))"
	if [ "${BENCH_PROFILE:-0}" = 1 ] && [ $authd = 1 ]; then
		# Profile the middle of the timed phase (preparation excluded as far
		# as possible: exchange mints codes first for as long as it runs).
		local secs=${DURATION%s}
		case $name in exchange | burst) sleep_first=$((secs + 3)) ;; *) sleep_first=3 ;; esac
		(sleep "$sleep_first"; curl -fsS "http://$PPROF_ADDR/debug/pprof/profile?seconds=$((secs - 4))" -o "$raw/$name-c$c.cpu.pprof") &
		prof=$!
	fi
	"$work/authbench" -c "$c" -d "$DURATION" -json "$@" >"$raw/$name-c$c.json"
	[ -n "$prof" ] && wait "$prof" || true
}

# run_mode NAME C: one authbench mode against authd.
run_mode() {
	local m=$1 c=$2
	case $m in
	introspect | client-credentials)
		bench "$m" "$c" -mode "$m" -target "http://$ADDR" -server-pid "$authd_pid" -client-id "$service" -client-secret "$service_secret" ;;
	exchange-dpop | replay-dpop)
		# The same modes with a DPoP proof (RFC 9449, ES256, one key per
		# run: a replay presents a fresh proof from the same key).
		AUTHBENCH_PASSWORD=$password bench "$m" "$c" -mode "${m%-dpop}" -dpop -label "$m" -target "http://$ADDR" -server-pid "$authd_pid" -client-id "$public" ;;
	sso-https)
		# The sso flow with a claimed https redirect: the client's
		# identity is assured, so an existing session gets a code
		# silently (RFC 8252 §8.6); "sso" (a private-use scheme) taps
		# the one-tap page first.
		AUTHBENCH_PASSWORD=$password bench "$m" "$c" -mode sso -label sso-https -redirect-uri https://authbench.example/callback -target "http://$ADDR" -server-pid "$authd_pid" -client-id "$public" ;;
	sso-consent)
		# A returning user of a third-party client: consent allowed
		# once per browser before the timed phase, then silent codes
		# (https redirect) and an ID token checked per iteration.
		AUTHBENCH_PASSWORD=$password bench "$m" "$c" -mode sso-consent -redirect-uri https://authbench.example/callback -target "http://$ADDR" -server-pid "$authd_pid" -client-id "$third" ;;
	passkey)
		# A user of its own per run: once a user has a passkey, a password
		# sign-in asks for it as the second factor (the other modes keep
		# "bench", and a second passkey run cannot enrol with a password).
		local pkuser="bench-passkey-$c-$RANDOM"
		printf '%s\n' "$password" | "$work/authd" users add "$pkuser" >&2
		AUTHBENCH_PASSWORD=$password bench "$m" "$c" -mode passkey -user "$pkuser" -target "http://$ADDR" -server-pid "$authd_pid" -client-id "$public" ;;
	challenge)
		# A first-party app's passkey sign-in at the challenge endpoint;
		# a user of its own per run, as for the passkey mode.
		local fpuser="bench-challenge-$c-$RANDOM"
		printf '%s\n' "$password" | "$work/authd" users add "$fpuser" >&2
		AUTHBENCH_PASSWORD=$password bench "$m" "$c" -mode challenge -user "$fpuser" -target "http://$ADDR" -server-pid "$authd_pid" -client-id "$firstparty" ;;
	token-exchange)
		# The native sign-in: a fresh provider ID token per iteration
		# (ES256, signed by authbench as the upstream), exchanged once.
		bench "$m" "$c" -mode token-exchange -upstream-listen "$UPSTREAM_ADDR" -target "http://$ADDR" -server-pid "$authd_pid" -client-id "$native" ;;
	burst)
		# Exchanges for half the duration, then $BURST password
		# sign-ins at once beside them (until they have finished).
		case " $BURST_CONCURRENCY " in *" $c "*) ;; *) return 0 ;; esac
		AUTHBENCH_PASSWORD=$password bench "$m" "$c" -mode burst -burst "$BURST" -target "http://$ADDR" -server-pid "$authd_pid" -client-id "$public" ;;
	*)
		AUTHBENCH_PASSWORD=$password bench "$m" "$c" -mode "$m" -target "http://$ADDR" -server-pid "$authd_pid" -client-id "$public" ;;
	esac
}

# Each ratio is measured next to its ceiling, so that both see the machine
# in the same state: the HTTP ceiling, then replay and replay-dpop, then the
# HTTP ceiling again; the database ceiling, then exchange and
# exchange-dpop, then the database ceiling again; then the other modes in
# MODES order. The report divides by the mean of a ceiling's two runs: each
# ceiling moved by up to a third between runs minutes apart (the database
# ceiling 1,751–2,934/s in one hour), more than authd did.
has_mode() { case " $MODES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
http_ceiling() { # before|after C
	[ "${BENCH_CEILINGS:-1}" != 0 ] || return 0
	bench "ceiling-http-$1" "$2" -mode ceiling-http -label "ceiling-http ($1)" -target "http://$CEIL_ADDR" -server-pid "$ceil_pid"
}
db_ceiling() { # before|after C
	[ "${BENCH_CEILINGS:-1}" != 0 ] || return 0
	wait_idle
	log "ceiling-db ($1) c=$2 ($DURATION)"
	"$work/authbench" ceiling-db -database-url "$PG/postgres?sslmode=disable" -c "$2" -d "$DURATION" -label "ceiling-db ($1)" -json >"$raw/ceiling-db-$1-c$2.json"
}
for c in $CONCURRENCY; do
	http_ceiling before "$c"
	for m in replay replay-dpop; do has_mode "$m" && run_mode "$m" "$c"; done
	if has_mode replay || has_mode replay-dpop; then http_ceiling after "$c"; fi
	db_ceiling before "$c"
	for m in exchange exchange-dpop token-exchange; do has_mode "$m" && run_mode "$m" "$c"; done
	if has_mode exchange || has_mode exchange-dpop || has_mode token-exchange; then db_ceiling after "$c"; fi
	for m in $MODES; do
		case $m in replay | replay-dpop | exchange | exchange-dpop | token-exchange) continue ;; esac
		run_mode "$m" "$c"
	done
done

peak=$(sed -n 's/^VmHWM:\s*//p' "/proc/$authd_pid/status")
report="$out/$stamp.md"
{
	echo "# authd benchmark, $stamp"
	echo
	echo "- machine: $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(free -g | awk '/^Mem:/{print $2}') GiB RAM, Linux $(uname -r)"
	echo "- $(go version | cut -d' ' -f3), PostgreSQL $(psql "$PG/postgres?sslmode=disable" -Atc 'show server_version' | cut -d' ' -f1), Redis $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'), all on this machine"
	echo "- authd ${BENCH_REV:-$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+dirty')}, authd serve on PostgreSQL + Redis, replay cache on, log level $LOG_LEVEL, database URL parameters: $PG_PARAMS, AUTHD_TOKEN_RATE_LIMIT=$AUTHD_TOKEN_RATE_LIMIT"
	echo "- each run: $DURATION, concurrency $CONCURRENCY; authbench on the same 2 cores as authd, PostgreSQL and Redis"
	echo "- authd peak RSS of the last run: $peak (per-run peaks in the table: VmHWM reset at the start of each run)"
	echo
	"$work/authbench" report "$raw"/*.json
} >"$report"
log "wrote $report"
cat "$report"
