#!/usr/bin/env bash
# Configures and builds Sandcastle into build/, then makes sure the guest
# image for this agent exists (built once, then cached by hash).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash packaging/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
# The same default image folder the app looks in (see EngineConfig::defaults).
if [ "$(id -u)" = 0 ]; then
  cache=${SANDCASTLE_IMAGE_DIR:-/var/lib/sandcastle/images}
  sudo=""
else
  cache=${SANDCASTLE_IMAGE_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/sandcastle/images}
  sudo=sudo # mmdebstrap needs root once; the image stays readable by you
fi
$sudo bash packaging/guest/build-image.sh --agent build/engine/agent/sandcastle-agent --cache "$cache" >&2
