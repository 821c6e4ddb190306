#!/usr/bin/env bash
# A guest image build whose mirror cannot be reached must fail, say which
# step failed, and leave nothing in the cache that a later run would use.
set -uo pipefail
builder="$1/packaging/guest/build-image.sh"
agent="$2"
cache=$(mktemp -d /tmp/sc-image-fail-XXXXXX)
trap 'rm -rf "$cache"' EXIT
# 77: ctest reports the test as skipped (SKIP_RETURN_CODE in
# tests/CMakeLists.txt), not as passed.
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: needs root (mmdebstrap)"; exit 77
fi
out=$(bash "$builder" --agent "$agent" --cache "$cache" --mirror http://127.0.0.1:9/debian 2>&1)
rc=$?
echo "$out" | tail -n 5
[ $rc -ne 0 ] || { echo "FAIL: the build succeeded against an unreachable mirror"; exit 1; }
echo "$out" | grep -q "mmdebstrap failed" || { echo "FAIL: no message naming the failed step"; exit 1; }
left=$(find "$cache" -mindepth 1 -maxdepth 1 ! -name .lock)
[ -z "$left" ] || { echo "FAIL: left behind: $left"; exit 1; }
grep -q " $cache/" /proc/mounts && { echo "FAIL: mounts left under $cache"; exit 1; }
echo "PASS: failed cleanly (exit $rc), cache empty"
