#!/usr/bin/env bash
# bench/rm_speed.py on a GPU machine with no network and no package index, from the repository's root: what the
# machine lacks travels as wheels in .whl/ (the list in bench/gpu-device.sh; the procedural ones are not needed).
# Arguments go to rm_speed.py after `--device cuda --model-shape qwen0.5b`. Results go to $OUT (default
# /tmp/rm-out): rm.json, the output (run.log) and the verifier's log.
#   bash bench/rm-device.sh --phases long --long-sizes 64 4096 --long-tokens 8000 --deadline 360
set -uo pipefail
OUT=${OUT:-/tmp/rm-out}
mkdir -p "$OUT"
source bench/device-env.sh || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout "${RM_BENCH_TIMEOUT:-540}" python3 bench/rm_speed.py --device cuda --model-shape qwen0.5b "$@" \
    --out "$OUT/rm.json" --verifier-log "$OUT/verifier.log" 2>&1 | tee "$OUT/run.log"
