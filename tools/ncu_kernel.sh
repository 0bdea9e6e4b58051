#!/usr/bin/env bash
# Nsight Compute on one kernel of the step: its duration, SM and memory throughput, achieved
# occupancy and registers, at the GPU's own clocks (--clock-control none).
#   bash tools/ncu_kernel.sh NAME [command...]
#   bash tools/ncu_kernel.sh linear_fwd_f32
#   bash tools/ncu_kernel.sh adamw_all python3 -m foxc.train --profile-steps 300:300 --n-steps 301
# NAME is a regular expression on kernel names. Only kernels launched inside a
# cuProfilerStart/Stop window are profiled (--profile-from-start off), so the command must
# open one (--profile-steps A:B); the default command is the learner benchmark's eager step
# with the window on step 3. Kernels inside CUDA graphs are profiled one by one as well.
# Environment: COUNT (launches to profile, default 3), FROM_START=1 (profile from the start,
# for a command without a window), REPORT (also keep the .ncu-rep there), NCU_ARGS (more ncu options).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit $([ $# -lt 1 ] && echo 2 || echo 0)
fi
command -v ncu >/dev/null || { echo "tools/ncu_kernel.sh: ncu (Nsight Compute) is not on PATH" >&2; exit 2; }
name=$1
shift
[ $# -gt 0 ] || set -- python3 -m foxc.bench learn --backend cuda --profile-steps 3:3

from_start=off
[ "${FROM_START:-0}" = 1 ] && from_start=on
report=${REPORT:-$(mktemp -d)/ncu_${name//[^A-Za-z0-9_]/_}}

# shellcheck disable=SC2086
ncu --clock-control none --profile-from-start "$from_start" --target-processes all \
  -k "regex:$name" --launch-count "${COUNT:-3}" \
  --section SpeedOfLight --section Occupancy --section LaunchStats \
  --force-overwrite -o "$report" ${NCU_ARGS:-} "$@"

echo
echo "== $name: key metrics ($report.ncu-rep) =="
ncu --import "$report.ncu-rep" --page details --print-units base \
  | grep -E '^  [^ ].*\(|^    (Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Block Size|Grid Size|Shared Memory Configuration Size|Waves Per SM)\b' \
  || ncu --import "$report.ncu-rep" --page details
