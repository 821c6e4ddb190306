#!/usr/bin/env bash
# The README's first command: install what is missing, build, prepare the
# guest image, then run the Sandcastle service (REST API on 127.0.0.1:8765).
# On the first start it prints an API key once. Extra arguments go to
# `sandcastle serve` (e.g. --port 9000).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/packaging/build.sh"
exec "$top/build/app/sandcastle" serve "$@"
