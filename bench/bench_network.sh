#!/usr/bin/env bash
# Sandbox egress speed, side by side with the host's: a test host in a
# network namespace serves a file; the host and a sandbox (through its
# passt and both filters) fetch it, and a small file many times (the cost
# of a new connection). Run by hand, as root, after a build:
#   sudo bash bench/bench_network.sh [MiB] [connections]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
mib=${1:-200}
conns=${2:-50}
work=$(mktemp -d /tmp/sc-bench-net-XXXXXX)
chmod 711 "$work" # QEMU and passt run as other users
ns=sctb$$
export SANDCASTLE_DATA_DIR=$work/data
mkdir -p "$SANDCASTLE_DATA_DIR"
serve_pid=""
cleanup() {
  if [ -n "${sbx:-}" ]; then api DELETE "/sandboxes/$sbx" >/dev/null || true; fi
  [ -z "$serve_pid" ] || kill "$serve_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  bash "$top/tests/support/testhost.sh" down "$ns"
  rm -rf "$work"
}
trap cleanup EXIT

bash "$top/tests/support/testhost.sh" up "$ns" "$work/host"
head -c "$((mib << 20))" /dev/urandom >"$work/host/www/big.bin"
"$top/build/app/sandcastle" config set sandbox_dns 198.51.100.2 >/dev/null
"$top/build/app/sandcastle" serve --port 0 --headless >"$work/serve.out" 2>&1 &
serve_pid=$!
for _ in $(seq 300); do grep -q 'sc_[a-z2-7]\{40\}' "$work/serve.out" && break; sleep 0.2; done
base=$(grep -o 'http://[0-9.:]*/v1' "$work/serve.out")
key=$(grep -o 'sc_[a-z2-7]\{40\}' "$work/serve.out" | head -1)
api() { curl -sS -X "$1" "$base$2" -H "Authorization: Bearer $key" ${3:+-d "$3"}; }
run() { api POST "/sandboxes/$sbx/exec" "$(jq -n --arg c "$1" '{command: $c, timeout_ms: 600000}')" | jq -r .stdout; }

sbx=$(api POST /sandboxes "{}" | jq -r .id)
[ "$sbx" != null ] || { echo "create failed; see $work/serve.out" >&2; exit 1; }
url=http://198.51.100.2/big.bin
# Milliseconds for $conns fetches of a small file, a new connection each.
timed="s=\$(date +%s%N); for i in \$(seq $conns); do curl -s -o /dev/null http://198.51.100.2/hello.txt; done; echo \$(( (\$(date +%s%N) - s) / 1000000 ))"
host_speed=$(curl -s -o /dev/null -w '%{speed_download}' "$url")
guest_speed=$(run "curl -s -o /dev/null -w '%{speed_download}' $url")
host_conn=$(sh -c "$timed")
guest_conn=$(run "$timed")
# The same loop reading a local file: what starting curl costs in the guest.
guest_local=$(run "${timed//http:\/\/198.51.100.2\/hello.txt/file:\/\/\/etc\/hostname}")
awk -v hs="$host_speed" -v gs="$guest_speed" -v hc="$host_conn" -v gc="$guest_conn" \
  -v gl="$guest_local" -v mib="$mib" -v n="$conns" 'BEGIN {
  printf "download of %d MiB from the test host (MiB/s)\n", mib
  printf "  host                %8.1f\n  sandbox             %8.1f\n  ratio sandbox/host  %8.3f\n",
    hs / 1048576, gs / 1048576, gs / hs
  printf "%d fetches of a small file, one connection each (ms per fetch)\n", n
  printf "  host                %8.1f\n  sandbox             %8.1f\n", hc / n, gc / n
  printf "  sandbox, file://    %8.1f   (curl itself, no network)\n", gl / n
}'
