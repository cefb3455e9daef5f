#!/usr/bin/env bash
# abba.sh runs scheduler_perf's workloads under the stock profile and the
# GPUSched profile, each run in a test process of its own, in the order
# stock, gpusched, gpusched, stock (an ABBA set), and prints every run's
# SchedulingThroughput average and, per workload, the median of each
# profile and their ratio.
#
# Why: `go test -bench .` runs one run of each profile, one after the
# other in one process, and on a 2-core machine one run differs from the
# next by up to a tenth; an ABBA set in fresh processes gives medians that
# the order of the runs does not favour (docs/operations.md).
#
# Environment (all optional):
#   SCHEDPERF_BENCHES  benchmarks to run (default: BenchmarkMiscGPU BenchmarkGangSchedulingGPU)
#   SCHEDPERF_SETS     ABBA sets per benchmark (default 1: two runs of each profile)
#   SCHEDPERF_OUT      folder for the logs, the JSON data items and abba.txt
#                      (default /tmp/schedperf-abba; each run's folder is emptied first)
#   SCHEDPERF_WORKLOADS, GPUSCHED_KUBE_BIN: as for `go test` (see schedperf_test.go)
#   SCHEDPERF_ARGS     extra flags for the test binary, e.g.
#                      "-perf-scheduling-label-filter integration-test" for upstream's small workloads
set -euo pipefail
benches=${SCHEDPERF_BENCHES:-BenchmarkMiscGPU BenchmarkGangSchedulingGPU}
sets=${SCHEDPERF_SETS:-1}
out=${SCHEDPERF_OUT:-/tmp/schedperf-abba}
case $sets in '' | *[!0-9]*)
	echo "abba.sh: SCHEDPERF_SETS=$sets: want a whole number of ABBA sets, at least 1" >&2
	exit 2
	;;
esac
sets=$((10#$sets))
if [ "$sets" -lt 1 ]; then
	echo "abba.sh: SCHEDPERF_SETS=$sets: want at least 1 ABBA set" >&2
	exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")"
if [ -n "${GPUSCHED_KUBE_BIN:-}" ]; then
	PATH=$GPUSCHED_KUBE_BIN:$PATH
fi
bin=$out/schedperf.test
go test -c -o "$bin" .
: >"$out/abba.txt"
for b in $benches; do
	for ((s = 0; s < sets; s++)); do
		k=0
		for prof in stock gpusched gpusched stock; do
			run=$out/$b-$s-$k-$prof
			k=$((k + 1))
			rm -rf "$run"
			mkdir -p "$run"
			rc=0
			# shellcheck disable=SC2086 # SCHEDPERF_ARGS is a list of flags
			"$bin" -test.run '^$' -test.bench "^$b\$/^$prof\$" -test.benchtime 1x -test.timeout 2h \
				-data-items-dir "$run" ${SCHEDPERF_ARGS:-} >"$run.log" 2>&1 || rc=$?
			# Each workload's SchedulingThroughput average, from the run's data
			# items (a run below a threshold prints no benchmark line but
			# writes them): "test case/workload average", one line each.
			tps=$(cat "$run"/*.json 2>/dev/null | awk '
				/"Average":/ { v = $2; sub(/,$/, "", v) }
				/"Metric": "SchedulingThroughput"/ { want = 1 }
				want && /"Name":/ {
					name = $2; gsub(/[",]/, "", name); n = split(name, part, "/")
					printf "%s/%s %.1f\n", part[3], part[4], v; want = 0
				}' || true)
			if [ -z "$tps" ]; then
				echo "abba.sh: $b ($prof) measured no SchedulingThroughput (exit $rc: no workload ran, or it ran too briefly to measure); see $run.log" >&2
				exit 1
			fi
			note=
			if [ "$rc" -ne 0 ]; then
				# A workload with a threshold (misc: 680 pods/s) fails below it,
				# as upstream's CI would; anything else is a failed run.
				if ! grep -a -q 'expected "SchedulingThroughput" "Average" to be higher' "$run.log"; then
					echo "abba.sh: $b ($prof) failed (exit $rc); see $run.log" >&2
					exit 1
				fi
				note=" (below upstream's threshold)"
			fi
			while read -r w tp; do
				echo "$b/$w $prof $tp" >>"$out/abba.txt"
				echo "$b/$w $prof $tp$note"
			done <<<"$tps"
		done
	done
done
echo
awk '
function median(list, n,    a, i, j, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ runs[$1, $2] = runs[$1, $2] " " $3; if (!($1 in seen)) { seen[$1] = 1; order[++nb] = $1 } }
END {
	printf "%-60s %-34s %-34s %s\n", "benchmark/test case/workload", "stock pods/s (median)", "gpusched pods/s (median)", "gpusched / stock"
	for (i = 1; i <= nb; i++) {
		b = order[i]; rs = substr(runs[b, "stock"], 2); rg = substr(runs[b, "gpusched"], 2)
		s = median(rs); g = median(rg)
		printf "%-60s %-34s %-34s %.2f\n", b, rs " (" s ")", rg " (" g ")", g / s
	}
}' "$out/abba.txt" | tee -a "$out/abba.txt"
