#!/bin/sh
# An "interpreter" for bench.mst_aim --mbi-python: runs the mbi driver (-m bench.mbi_mst_aim ...) through
# bench.mbi_lowmaps, with the repository root as the working directory (the driver passes absolute paths).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" && exec "$ROOT/.venv/bin/python" -m bench.mbi_lowmaps "$@"
