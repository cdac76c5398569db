#!/usr/bin/env bash
# bench/compare.sh BASE HEAD — is HEAD slower than BASE?
#
# Builds authd at both revisions (git worktrees in a temporary directory;
# HEAD may be the word HEAD or any revision) and one authbench (this
# tree's, so both sides meet the same load generator), then runs
# bench/run.sh's modes against each, in rounds: in each round, every mode
# runs on both sides back to back (BASE then HEAD, or HEAD then BASE,
# alternating by mode and by round), on this machine's PostgreSQL and Redis,
# each run on a fresh database. Prints, per mode, both sides' ok/s in each
# round, their medians and HEAD/BASE. A guard against a change that slows a
# path, not a speed test: the runs pair and alternate because the machine
# drifts by more than most changes move.
#
# Settings (environment), besides bench/run.sh's own:
#   COMPARE_ROUNDS   rounds (default 4: each side goes first in two)
#   BENCH_MODES      modes (default: the modes both revisions support that
#                    are plain throughput: login sso sso-https sso-consent
#                    exchange exchange-dpop replay replay-dpop refresh
#                    introspect client-credentials)
#   BENCH_DURATION   per run (default here 10s)
#   BENCH_CONCURRENCY (default here 16)
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -eq 2 ] || { echo "usage: bench/compare.sh BASE HEAD" >&2; exit 2; }
base_rev=$(git rev-parse --verify "$1^{commit}")
head_rev=$(git rev-parse --verify "$2^{commit}")
ROUNDS=${COMPARE_ROUNDS:-4}
export BENCH_MODES=${BENCH_MODES:-login sso sso-https sso-consent exchange exchange-dpop replay replay-dpop refresh introspect client-credentials}
export BENCH_DURATION=${BENCH_DURATION:-10s}
export BENCH_CONCURRENCY=${BENCH_CONCURRENCY:-16}
export BENCH_CEILINGS=0

log() { printf '==> %s\n' "$*" >&2; }

tmp=$(mktemp -d)
cleanup() {
	git worktree remove --force "$tmp/src-base" 2>/dev/null || true
	git worktree remove --force "$tmp/src-head" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

for side in base head; do
	rev=$base_rev
	[ $side = head ] && rev=$head_rev
	log "building authd at ${rev:0:9} ($side)"
	git worktree add -q --detach "$tmp/src-$side" "$rev"
	(cd "$tmp/src-$side" && go build -o "$tmp/authd-$side" ./cmd/authd)
done
log "building authbench from this tree"
go build -o "$tmp/authbench" ./cmd/authbench

stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
out="bench/results/compare-$stamp"
mkdir -p "$out"
base_dirs=()
head_dirs=()
# Each mode's two runs are a pair, back to back: this machine's speed
# drifts over minutes (the same argon2id sign-in has taken twice the CPU
# in two runs a few minutes apart), so a whole round of one side, then of
# the other, put minutes between the two runs of one mode. Which side goes
# first alternates by round and by mode, so each goes first equally often.
for r in $(seq 1 "$ROUNDS"); do
	i=0
	for mode in $BENCH_MODES; do
		i=$((i + 1))
		order="base head"
		[ $(((r + i) % 2)) = 0 ] && order="head base"
		for side in $order; do
			rev=$base_rev
			[ $side = head ] && rev=$head_rev
			log "round $r/$ROUNDS, $mode: $side (${rev:0:9})"
			dir="$out/r$r-$mode-$side"
			BENCH_MODES=$mode BENCH_AUTHD="$tmp/authd-$side" BENCH_AUTHBENCH="$tmp/authbench" BENCH_OUT="$dir" BENCH_REV="${rev:0:9}" \
				bash bench/run.sh >/dev/null
			# run.sh writes DIR/<stamp>/*.json and DIR/<stamp>.md.
			raw=$(find "$dir" -mindepth 1 -maxdepth 1 -type d | head -1)
			if [ $side = base ]; then base_dirs+=("$raw"); else head_dirs+=("$raw"); fi
		done
	done
done

join() { local IFS=,; echo "$*"; }
{
	echo "# bench/compare.sh $1 (${base_rev:0:9}) → $2 (${head_rev:0:9}), $stamp"
	echo
	echo "- $ROUNDS rounds, each mode run by both sides back to back (which first alternates), $BENCH_DURATION per run, c=$BENCH_CONCURRENCY, $(nproc) CPUs, on this machine's PostgreSQL and Redis"
	echo
	"$tmp/authbench" compare -base-name BASE -head-name HEAD -base "$(join "${base_dirs[@]}")" -head "$(join "${head_dirs[@]}")"
} | tee "$out.md"
log "wrote $out.md"
