#!/usr/bin/env bash
# On a GPU machine, from the checkout, without installing: the GPU tests, then every benchmark,
# then a short table. Writes gpu_tests.log, bench.log and bench.json to $OUT (or ./device-check/).
#   bash tools/device_check.sh            # FOXC_BENCHES="driver lobsim" limits the benchmarks
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-$PWD/device-check}
mkdir -p "$out" "$out/.json"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader || true

timeout_flag=$(python3 -c "import pytest_timeout" 2>/dev/null && echo "--timeout 600")
python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs $timeout_flag 2>&1 | tee "$out/gpu_tests.log"
tests_rc=${PIPESTATUS[0]}

benches=${FOXC_BENCHES:-$(python3 -m foxc.bench --list)}
bench_rc=0
: > "$out/bench.log"
for bench in $benches; do
  echo "== $bench" >> "$out/bench.log"
  extra=()
  [ "$bench" = train ] && extra=(--busy)  # true GPU busy from CUPTI kernel records
  python3 -m foxc.bench "$bench" --backend cuda "${extra[@]}" --json "$out/.json/$bench.json" 2>&1 \
    | tee -a "$out/bench.log" || bench_rc=1
done
if printf '%s\n' $benches | grep -qx train; then  # the step in TF32 too (--precision tf32)
  echo "== train --precision tf32" >> "$out/bench.log"
  python3 -m foxc.bench train --backend cuda --busy --precision tf32 --json "$out/.json/train_tf32.json" 2>&1 \
    | tee -a "$out/bench.log" || bench_rc=1
fi
python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
merged = {p.stem: json.loads(p.read_text()) for p in sorted((out / ".json").glob("*.json"))}
(out / "bench.json").write_text(json.dumps(merged, indent=1) + "\n")
PY
rm -rf "$out/.json"

echo
echo "== device check =="
grep -E "[0-9]+ (passed|failed)" "$out/gpu_tests.log" | tail -1
grep '^summary:' "$out/bench.log" | sed 's/^summary: //'
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
