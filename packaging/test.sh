#!/usr/bin/env bash
# The README's second command: install, build, and run the whole suite,
# including the tests that boot real VMs.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/packaging/deps.sh"
cd "$top"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
# The MCP tests' client: the official SDK from npm, pinned by the lock file.
npm ci --prefix tests/mcp --no-audit --no-fund --loglevel=error
ctest --test-dir build --output-on-failure -j2 "$@"
