#!/usr/bin/env bash
# bench/judge_served.py on a GPU machine with no network and no package index, from the repository's root (issue 26's
# GPU check: a Qwen2.5-0.5B-shaped judge served by `transformers serve`, 1,024 items through the verifier). What the
# machine lacks travels as wheels in .whl/: the list in bench/gpu-device.sh, and for `transformers serve` (openai,
# typer and theirs; the versions this project's tests ran with):
#   pip download <gpu-device.sh's options> -d .whl openai==3.57.0 httpx2==2.16.2 httpcore2==2.16.2 \
#     truststore==0.10.5 jiter==0.19.0 typer==0.29.2 shellingham==1.5.4 rich==15.0.0 markdown-it-py==4.3.0 \
#     mdurl==0.1.2 click==8.5.1
# Arguments go to judge_served.py after the defaults below. Results go to $OUT (default /tmp/judge-out): served.json,
# the output (run.log), the server's and the verifier's logs.
#   bash bench/judge-device.sh                        # ~3-4 min: build and teach ~30 s, serve start ~1 min, 2 phases
set -uo pipefail
OUT=${OUT:-/tmp/judge-out}
mkdir -p "$OUT"
source bench/device-env.sh || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout "${JUDGE_BENCH_TIMEOUT:-480}" python3 bench/judge_served.py --device cuda --model-shape qwen0.5b --items 1024 \
    --work /tmp/judge-served "$@" --out "$OUT/served.json" 2>&1 | tee "$OUT/run.log"
status=${PIPESTATUS[0]}
cp /tmp/judge-served/serve.log /tmp/judge-served/verifier.log "$OUT/" 2>/dev/null
exit $status
