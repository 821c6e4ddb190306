#!/usr/bin/env bash
# Fails when a C++ file differs from what clang-format makes of it.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cpp' '*.h' 2>/dev/null || find app engine tests bench ui -name '*.cpp' -o -name '*.h')
clang-format --dry-run -Werror $files
echo "clang-format: $(echo "$files" | wc -w) files clean"
