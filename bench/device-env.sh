# Sourced by the device scripts (bench/gpu-device.sh, bench/rm-device.sh) from the repository's root, with OUT set:
# installs the wheels in .whl/ (see gpu-device.sh for the list and how to make them) into /tmp/site, puts them and
# the repository on PYTHONPATH, and builds the C extensions. Logs: $OUT/pip.log, $OUT/build.log.
wheels=(.whl/*.whl)
if ! python3 -c 'import pyarrow, sys; sys.exit(int(pyarrow.__version__.split(".")[0]) < 24)'; then
    wheels=($(ls .whl/*.whl | grep -v '/datasets-') .whl/alt/datasets-*.whl)
fi
if ls .whl/sdist/*.tar.gz >/dev/null 2>&1; then  # C extensions with no wheel for this Python: built here
    python3 -m pip wheel -q --no-deps --no-build-isolation --no-index -w /tmp/built .whl/sdist/*.tar.gz \
        >>"$OUT/pip.log" 2>&1 && wheels+=(/tmp/built/*.whl)
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "${wheels[@]}" >>"$OUT/pip.log" 2>&1 || { tail -20 "$OUT/pip.log"; return 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 setup.py build_ext --inplace >"$OUT/build.log" 2>&1 || echo "no C extension: repetition runs in Python"
