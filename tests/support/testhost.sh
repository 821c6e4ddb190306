#!/usr/bin/env bash
# A test host in a network namespace, reachable from this machine only:
#   198.51.100.2 (TEST-NET-2, public-looking): HTTP on 80 and HTTPS on 443
#     (a file, a git repository over git's "dumb" HTTP, a Python package
#     index, an npm package tarball; the certificate is DIR/cert.pem), DNS
#     on 53 (*.sandcastle.test -> 198.51.100.2), and listeners on the SMTP
#     ports 25, 465 and 587;
#   10.99.0.2, 172.31.99.2, 192.168.99.2, 100.100.99.2 and 169.254.169.254:
#     the same HTTP server at private, carrier-NAT and link-local addresses
#     (the metadata address), routed from the host through the namespace.
# The host's end of the link is 198.51.100.1. Nothing leaves this machine.
#   testhost.sh up NAME DIR     (NAME: at most 10 characters)
#   testhost.sh down NAME
set -euo pipefail
cmd=$1
ns=$2
private_addresses="10.99.0.2 172.31.99.2 192.168.99.2 100.100.99.2 169.254.169.254"

down() {
  local ns=${ns:?}
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  ip netns del "$ns" 2>/dev/null || true
  # The routes through the link went with it; a stale host end is removed.
  ip link del "${ns}h" 2>/dev/null || true
}

if [ "$cmd" = down ]; then
  down
  exit 0
fi

dir=$3
# A test that was killed leaves its host behind (it would hold the
# addresses): one test host at a time, so any earlier one goes.
for stale in $(ip netns list | awk '$1 ~ /^sct[0-9]*$/ {print $1}'); do
  ns=$stale down
done
down
mkdir -p "$dir/www"
ip netns add "$ns"
ip link add "${ns}h" type veth peer name "${ns}n" netns "$ns"
ip addr add 198.51.100.1/24 dev "${ns}h"
ip link set "${ns}h" up
ip -n "$ns" link set lo up
ip -n "$ns" addr add 198.51.100.2/24 dev "${ns}n"
ip -n "$ns" link set "${ns}n" up
ip -n "$ns" route add default via 198.51.100.1
for a in $private_addresses; do
  ip -n "$ns" addr add "$a/32" dev lo
  ip route add "$a/32" via 198.51.100.2
done

# Content: a file, a git repository, a package index with one wheel.
echo "hello from the test host" >"$dir/www/hello.txt"
work="$dir/repo-work"
rm -rf "$work" "$dir/www/repo.git"
git init -q -b main "$work"
echo "print('cloned')" >"$work/main.py"
git -C "$work" add main.py
git -C "$work" -c user.name=test -c user.email=test@sandcastle.test commit -q -m "first"
git clone -q --bare "$work" "$dir/www/repo.git"
git -C "$dir/www/repo.git" update-server-info
python3 - "$dir/www" <<'EOF'
import base64, hashlib, os, sys, zipfile
www = sys.argv[1]
files = {
    "sc_hello/__init__.py": b'GREETING = "hello from the package index"\n',
    "sc_hello-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: sc-hello\nVersion: 1.0\n",
    "sc_hello-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: sandcastle-test\n"
    b"Root-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(data)}")
record.append("sc_hello-1.0.dist-info/RECORD,,")
files["sc_hello-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
wheel = "sc_hello-1.0-py3-none-any.whl"
with zipfile.ZipFile(os.path.join(www, wheel), "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
os.makedirs(os.path.join(www, "simple", "sc-hello"), exist_ok=True)
with open(os.path.join(www, "simple", "sc-hello", "index.html"), "w") as f:
    f.write(f'<html><body><a href="../../{wheel}">{wheel}</a></body></html>\n')
EOF

# An npm package, as `npm pack` lays it out.
mkdir -p "$dir/npm/package"
echo '{"name": "sc-hello-npm", "version": "1.0.0", "main": "index.js"}' >"$dir/npm/package/package.json"
echo 'module.exports = "hello from the npm tarball";' >"$dir/npm/package/index.js"
tar -czf "$dir/www/sc-hello-npm-1.0.0.tgz" -C "$dir/npm" package
# A self-signed certificate for the test host's names.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=web.sandcastle.test" \
  -addext "subjectAltName=DNS:web.sandcastle.test,DNS:git.sandcastle.test" \
  -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null

run_in_ns() {
  ip netns exec "$ns" "$@" >>"$dir/servers.log" 2>&1 &
}
run_in_ns python3 -m http.server 80 --bind 0.0.0.0 --directory "$dir/www"
run_in_ns python3 -c '
import http.server, ssl, sys, functools
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1] + "/www")
server = http.server.ThreadingHTTPServer(("0.0.0.0", 443), handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1] + "/cert.pem", sys.argv[1] + "/key.pem")
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
' "$dir"
run_in_ns dnsmasq --keep-in-foreground --no-resolv --no-hosts --bind-interfaces \
  --listen-address=198.51.100.2,10.99.0.2 --address=/sandcastle.test/198.51.100.2 --pid-file=
run_in_ns python3 -c '
import socketserver, threading
class Greet(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(b"220 test host ESMTP\r\n")
socketserver.ThreadingTCPServer.allow_reuse_address = True
for port in (25, 465, 587):
    server = socketserver.ThreadingTCPServer(("0.0.0.0", port), Greet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
threading.Event().wait()
'
# Ready when every service answers from the host.
for _ in $(seq 100); do
  if curl -s -o /dev/null --max-time 1 http://198.51.100.2/hello.txt &&
    curl -s -o /dev/null --max-time 1 --cacert "$dir/cert.pem" \
      --resolve web.sandcastle.test:443:198.51.100.2 https://web.sandcastle.test/hello.txt &&
    (exec 3<>/dev/tcp/198.51.100.2/587) 2>/dev/null &&
    python3 -c '
import socket
q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03git\x0asandcastle\x04test\x00\x00\x01\x00\x01"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
s.sendto(q, ("198.51.100.2", 53))
assert bytes([198, 51, 100, 2]) in s.recv(512)
' 2>/dev/null; then
    exit 0
  fi
  sleep 0.1
done
echo "testhost: the services in $ns did not come up; see $dir/servers.log" >&2
exit 1
