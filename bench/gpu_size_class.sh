#!/usr/bin/env bash
# The size-class program on a GPU machine with no network (bench/GPU.md): the invariant suite and the size-class
# oracle's tests (timed; every example a new structure), then bench/size_class.py (dense against size-class).
#   bash bench/gpu_size_class.sh OUT_DIR [TEST_SECONDS] [BENCH_SECONDS] [size_class.py options]
# Wheels: .whl/*.whl (mbi) and .whl/tests/*.whl (hypothesis, pytest-xdist, execnet, sortedcontainers).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bash bench/gpu_size_class.sh OUT_DIR [TEST_SECONDS] [BENCH_SECONDS]}
TEST_S=${2:-240}
BENCH_S=${3:-150}
mkdir -p "$OUT"
python3 -m pip install --quiet --no-index --no-deps --upgrade --target /tmp/site .whl/*.whl .whl/tests/*.whl 2>/dev/null ||
  python3 -c "import glob, zipfile; [zipfile.ZipFile(w).extractall('/tmp/site') for w in glob.glob('.whl/*.whl') + glob.glob('.whl/tests/*.whl')]"
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ -d .whl/data ] && [ -z "${PGMJAX_DATA:-}" ]; then export PGMJAX_DATA=$PWD/.whl/data; fi
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # several test workers share the device
python3 -m pgmjax info > "$OUT/info.txt" 2>&1
start=$(date +%s)
timeout "$TEST_S" python3 -m pytest -q -p no:cacheprovider -n 4 --dist loadfile --durations=20 \
  tests/integration/test_invariants.py tests/graph/test_routed_oracle.py > "$OUT/tests.txt" 2>&1
echo "exit $? after $(( $(date +%s) - start )) s (limit $TEST_S s)" >> "$OUT/tests.txt"
tail -3 "$OUT/tests.txt"
timeout "$BENCH_S" python3 -m bench.size_class --out "$OUT/size_class_gpu" "${@:4}" > "$OUT/size_class.txt" 2>&1
echo "size_class exit $?" >> "$OUT/size_class.txt"
tail -25 "$OUT/size_class.txt"
