#!/usr/bin/env bash
# An Nsight Systems timeline of training steps A..B only (cuProfilerStart/Stop bracket them):
#   bash tools/profile.sh [trainer args...]            # steps $STEPS (default 200:210)
#   bash tools/profile.sh --profile-steps 50:60 --graph off --n-steps 70 ...
# Every argument goes to `python -m foxc.train`; --profile-steps is added when absent.
# Environment: STEPS (200:210), REPORT (report path without extension; default
# $OUT or ./runs/profile, then foxc_steps_A-B), GRAPH_TRACE (node, the default: every kernel of a
# graph replay on the timeline and in the kernel summary; graph: one block per replay, less overhead).
# After recording it prints nsys's kernel and NVTX summaries of the window.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
command -v nsys >/dev/null || { echo "tools/profile.sh: nsys (Nsight Systems) is not on PATH" >&2; exit 2; }

steps=${STEPS:-200:210}
has_window=0
for arg in "$@"; do
  case $arg in
    --profile-steps) has_window=1 ;;
    --profile-steps=*) has_window=1; steps=${arg#--profile-steps=} ;;
  esac
done
prev=
for arg in "$@"; do [ "$prev" = --profile-steps ] && steps=$arg; prev=$arg; done
[ "$has_window" -eq 1 ] || set -- --profile-steps "$steps" "$@"

out=${OUT:-$PWD/runs/profile}
mkdir -p "$out"
report=${REPORT:-$out/foxc_steps_${steps/:/-}}

nsys profile --capture-range=cudaProfilerApi --capture-range-end=stop -t cuda,nvtx \
  --cuda-graph-trace="${GRAPH_TRACE:-node}" --force-overwrite=true -o "$report" \
  python3 -m foxc.train "$@"

echo
echo "== steps $steps: $report.nsys-rep =="
nsys stats --force-export=true -r cuda_gpu_kern_sum,nvtx_sum "$report.nsys-rep" || true
