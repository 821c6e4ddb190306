#!/usr/bin/env bash
# The README's first command: install what is missing, build, prepare the
# guest image, then run the Sandcastle service (REST API on 127.0.0.1:8765).
# On the first start it prints an API key once. Extra arguments go to
# `sandcastle serve` (e.g. --port 9000).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/packaging/build.sh"
# With a display, `serve` opens the window. sudo keeps DISPLAY and XAUTHORITY,
# but a session that leaves XAUTHORITY unset means ~/.Xauthority, and under
# sudo ~ is root's: point it at the invoking user's.
if [ -n "${DISPLAY:-}" ] && [ -z "${XAUTHORITY:-}" ] && [ -n "${SUDO_USER:-}" ]; then
  user_home=$(getent passwd "$SUDO_USER" | cut -d: -f6)
  if [ -f "$user_home/.Xauthority" ]; then export XAUTHORITY="$user_home/.Xauthority"; fi
fi
exec "$top/build/app/sandcastle" serve "$@"
