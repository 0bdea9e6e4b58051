#!/usr/bin/env bash
# On a GPU machine, from the checkout, without installing: the GPU tests, then the benchmarks,
# then a short table. Logs and JSON go to $OUT (or ./device-check/).
#   bash tools/device_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-$PWD/device-check}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader || true

python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs 2>&1 | tee "$out/gpu_tests.log"
tests_rc=${PIPESTATUS[0]}

benches=${FOXC_BENCHES:-$(python3 -m foxc.bench --list)}
bench_rc=0
for bench in $benches; do
  python3 -m foxc.bench "$bench" --backend cuda --json "$out/bench_$bench.json" 2>&1 | tee "$out/bench_$bench.log" \
    || bench_rc=1
done

echo
echo "== device check =="
grep -E "^[0-9]+ (passed|failed)|passed|failed" "$out/gpu_tests.log" | tail -1
for bench in $benches; do
  grep '^summary:' "$out/bench_$bench.log" | sed "s/^summary:/$bench:/"
done
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
