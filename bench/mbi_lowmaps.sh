#!/bin/sh
# An "interpreter" for bench/mst_aim.py --mbi-python: runs the mbi driver through bench/mbi_lowmaps.py.
HERE=$(dirname "$0")
exec "$HERE/../.venv/bin/python" "$HERE/mbi_lowmaps.py" "$@"
