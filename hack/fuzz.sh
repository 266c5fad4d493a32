#!/usr/bin/env bash
# Runs every Go fuzz target for a bounded time (FUZZTIME, default 20s, any -fuzztime value) and
# fails if any of them finds a crash. Go fuzzes one target per invocation, so each target gets
# its own `go test -fuzz`; the first one compiles the instrumented packages, the others reuse
# the build cache. A crash leaves its input in the package's testdata/fuzz/<target>/, where the
# regular `go test` replays it from then on: commit it with the fix.
#
# FUZZPARALLEL (default 1) is the number of fuzzing workers per target. FUZZMINIMIZETIME (default
# 5s) bounds minimizing each new input: at go's default (60s) a slow target, such as the
# admission handler with policies loaded, spends its whole budget minimizing.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-20s}"
FUZZPARALLEL="${FUZZPARALLEL:-1}"
FUZZMINIMIZETIME="${FUZZMINIMIZETIME:-5s}"

# package target
targets=(
	"./policyserver FuzzAdmissionReview"
	"./policyserver FuzzRequestLabels"
	"./policyserver/engine FuzzPolicySettings"
	"./policyserver/engine FuzzParseConstraintTemplate"
	"./spoke-addon/configpolicy FuzzCompareObject"
	"./policyserver/lifecycle/cache FuzzOpen"
)

failed=()
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	start=$(date +%s)
	log=$(mktemp)
	if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" -parallel "$FUZZPARALLEL" "$pkg" >"$log" 2>&1; then
		status=ok
	else
		status=FAILED
		failed+=("$pkg $name")
	fi
	# The last progress line says how many inputs ran.
	execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 || true)
	echo "fuzz: $status $pkg $name: $(($(date +%s) - start))s wall (fuzzing $FUZZTIME) ${execs}"
	if [ "$status" = FAILED ]; then
		tail -40 "$log"
	fi
	rm -f "$log"
done

if [ "${#failed[@]}" -gt 0 ]; then
	echo "fuzz: crashes or failures in: ${failed[*]} (inputs are in each package's testdata/fuzz/)" >&2
	exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran $FUZZTIME each without a crash"
