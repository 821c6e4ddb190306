"""Generated hostile requests against a running Sandcastle: malformed JSON,
unknown fields, wrong types, out-of-range values, odd paths and ids, bad
headers, broken HTTP. Every request is invalid by construction, so every
answer must be a 4xx with the JSON error envelope (or, for HTTP the server
cannot parse, a closed connection). Afterwards the server must still answer
correctly. Usage: fuzz.py BASE_URL KEY SANDBOX_ID [COUNT]"""
import json
import random
import socket
import sys
import urllib.parse

import requests

base, key, box = sys.argv[1], sys.argv[2], sys.argv[3]
count = int(sys.argv[4]) if len(sys.argv) > 4 else 1200
rng = random.Random(1234)
host, port = urllib.parse.urlsplit(base).hostname, urllib.parse.urlsplit(base).port
auth = {"Authorization": f"Bearer {key}"}

weird_ids = ["sbx_", "sbx_" + "a" * 20, "../../etc/passwd", "%00", "sbx_%2F..", "x" * 5000,
             "sbx_AAAAAAAAAAAAAAAAAAAA", "null", "🦀", "sbx_aaaaaaaaaaaaaaaaaaa!", "%2e%2e"]
bad_values = [None, True, -1, 0, 1.5, 1e308, -1e308, 2**63, "", "x" * 10000, [], {}, [1, 2],
              {"a": {"b": {}}}, "\u0000", "💥" * 100]

def bad_json():
    choices = [
        b"{", b"}", b"[", b"null", b"[]", b'"str"', b"123", b"{\"command\": }", b"\xff\xfe\x00",
        b"{" * 5000 + b"}" * 5000, b"[" * 20000, b"{\"a\":1,}", b"{'single': 1}", b"\x00" * 100,
        bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))),
    ]
    return rng.choice(choices)

def bad_create():
    body = {"size": "small", "timeout_minutes": 5}
    kind = rng.randint(0, 4)
    if kind == 0:
        body[rng.choice(["sizes", "Size", "timeout", "image", "", "__proto__"])] = 1
    elif kind == 1:
        body["size"] = rng.choice([v for v in bad_values if not isinstance(v, str) or v != ""] + ["huge", "SMALL"])
        if body["size"] is None:
            body["size"] = "gigantic"
    elif kind == 2:
        body["timeout_minutes"] = rng.choice([0, -5, 1441, 10**12, 1.5, "30", [], True])
    elif kind == 3:
        body["name"] = rng.choice([5, [], {}, "x" * 500, "a\u0001b", True])
    else:
        return bad_json()
    return json.dumps(body).encode()

def bad_exec():
    body = {"command": "echo hi"}
    kind = rng.randint(0, 6)
    if kind == 0:
        del body["command"]
        body["cmd"] = "echo hi"
    elif kind == 1:
        body["command"] = rng.choice([None, 1, [], {}, True, "", "   ", "a\u0000b"])
        if body["command"] is None:
            body["command"] = 7
    elif kind == 2:
        body["timeout_ms"] = rng.choice([0, -1, 3600001, 1e20, "100", [], 0.5])
    elif kind == 3:
        body["env"] = rng.choice([[], "A=B", 5, {"1BAD": "x"}, {"A": 1}, {"A": None}, {"A B": "x"},
                                  {"": "x"}, {"A": "b\u0000"}])
    elif kind == 4:
        body["cwd"] = rng.choice(["relative", 5, [], "x" * 5000, "../x"])
    elif kind == 5:
        body["unknown_" + str(rng.randint(0, 99))] = rng.choice(bad_values)
    else:
        return bad_json()
    return json.dumps(body).encode()

def generated():
    kind = rng.randint(0, 11)
    if kind == 0:
        return "POST", "/sandboxes", bad_create(), auth
    if kind == 1:
        return "POST", f"/sandboxes/{box}/exec", bad_exec(), auth
    if kind == 2:
        return "POST", f"/sandboxes/{box}/extend", json.dumps(
            {"additional_minutes": rng.choice([0, -1, 100000, "5", None, 2.5, []])}).encode(), auth
    if kind == 3:
        return rng.choice(["GET", "DELETE", "POST"]), f"/sandboxes/{rng.choice(weird_ids)}" + \
            rng.choice(["", "/exec", "/extend", "/files", "/nope"]), b"{}", auth
    if kind == 4:
        return "GET", "/sandboxes?" + rng.choice(["limit=0", "limit=101", "limit=abc", "limit=-1",
                                                   "status=zombie", "starting_after=sbx_nope",
                                                   "foo=bar", "limit=1e9"]), b"", auth
    if kind == 5:
        return rng.choice(["PUT", "GET"]), f"/sandboxes/{box}/files?" + rng.choice(
            ["", "path=", "path=relative", "path=/etc/shadow", "path=/root/x", "path=/proc/1/mem",
             "other=1", "path=/a&path2=/b", "path=%00"]), b"data", auth
    if kind == 6:
        return rng.choice(["PATCH", "OPTIONS", "PUT"]), rng.choice(
            ["/sandboxes", f"/sandboxes/{box}", "/sizes", "/account"]), b"{}", auth
    if kind == 7:
        return "GET", rng.choice(["/", "/../../etc", "/v2/sandboxes", "/sandboxes/" + box + "/exec/x",
                                   "/" + "a" * 3000]), b"", auth
    if kind == 8:
        return "POST", "/sandboxes", b"{}", rng.choice([
            {}, {"Authorization": "Bearer"}, {"Authorization": "Bearer sc_" + "a" * 40},
            {"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": key},
            {"Authorization": "Bearer " + "x" * 5000}])
    if kind == 9:
        return "GET", "/sizes", b"", dict(auth, Host=rng.choice(
            ["evil.example", "127.0.0.1.nip.io", "localhost.evil", "10.0.0.1", "[::2]"]))
    if kind == 10:
        return "POST", "/sandboxes", b"{}", dict(auth, Origin=rng.choice(
            ["http://evil.example", "null", "https://localhost", "http://127.0.0.1:1"]))
    return "POST", "/sandboxes", b"{}", dict(auth, **{"Idempotency-Key": rng.choice(
        ["x" * 300, "bad key with spaces", "\u00e9t\u00e9"])})

def raw_garbage():
    """HTTP the server cannot parse; it may answer 400 or just close."""
    choices = [
        b"GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"\x16\x03\x01\x02\x00",
        b"POST /v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n",
        b"POST /v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"GET /v1/sizes HTTP/1.1\r\n" + b"X-Long: " + b"a" * 100000 + b"\r\n\r\n",
        b"POST /v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        bytes(rng.getrandbits(8) for _ in range(200)),
    ]
    return rng.choice(choices)

def send_raw(data):
    s = socket.create_connection((host, port), timeout=10)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got
    except (socket.timeout, ConnectionResetError, BrokenPipeError):
        return b""
    finally:
        s.close()

session = requests.Session()
statuses = {}
failures = []
for i in range(count):
    if i % 10 == 9:
        answer = send_raw(raw_garbage())
        status = int(answer[9:12]) if answer.startswith(b"HTTP/1.1 ") else 0
        statuses[status] = statuses.get(status, 0) + 1
        if status not in (0, 400, 401, 403, 404, 405, 408, 413, 431):
            failures.append(("raw", status, answer[:200].decode("latin-1")))
        continue
    method, path, body, headers = generated()
    r = session.request(method, base + path, data=body, headers=headers, timeout=60)
    statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
    ok = 400 <= r.status_code < 500
    if ok and method != "HEAD":
        try:
            err = r.json()["error"]
            ok = bool(err["type"]) and len(err["message"]) > 10
        except Exception:
            ok = False
    if not ok:
        failures.append((method, path[:100], r.status_code, r.text[:200]))

# Still alive, still correct.
alive = session.get(f"{base}/sandboxes/{box}", headers=auth, timeout=30).json()
echo = session.post(f"{base}/sandboxes/{box}/exec", headers=auth, timeout=60,
                    json={"command": "echo still-alive"}).json()
print(json.dumps({"sent": count, "statuses": {str(k): v for k, v in sorted(statuses.items())},
                  "failures": failures[:20], "failure_count": len(failures),
                  "box_status": alive.get("status"), "echo": echo.get("stdout")}))
sys.exit(1 if failures or echo.get("stdout") != "still-alive\n" else 0)
