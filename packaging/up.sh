#!/usr/bin/env bash
# The README's first command: install what is missing, build, prepare the
# guest image, then run Sandcastle (for now: the engine demo).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/packaging/build.sh"
exec "$top/build/app/sandcastle" demo "$@"
