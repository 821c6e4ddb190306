// The official MCP SDK's Client against Sandcastle, over one transport.
// Usage: node client.mjs http|stdio BASE_URL KEY SANDCASTLE_BINARY BROKE_KEY
// (BROKE_KEY: a key of an account with no credit).
// BASE_URL is the service root (http://127.0.0.1:PORT). Exits non-zero on
// the first failed expectation; prints one line per step.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const [mode, base, key, binary, brokeKey] = process.argv.slice(2);

function transportFor(apiKey, extraHeaders = {}, url = base) {
  if (mode === "http")
    return new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${apiKey}`, ...extraHeaders } },
    });
  return new StdioClientTransport({
    command: binary,
    args: ["mcp"],
    env: { ...process.env, AAS_API_KEY: apiKey, SANDCASTLE_URL: url },
    stderr: "pipe",
  });
}

async function connect(apiKey, extraHeaders, url) {
  const client = new Client({ name: "sandcastle-test", version: "1.0.0" });
  await client.connect(transportFor(apiKey, extraHeaders, url));
  return client;
}

const step = (what) => console.log(`ok ${mode} ${what}`);
const text = (r) => r.content.map((c) => c.text).join("\n");

const client = await connect(key);
assert.equal(client.getServerVersion().name, "sandcastle");
step(`initialize (protocol ${client.transport.protocolVersion ?? "negotiated"})`);

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
assert.deepEqual(names, ["create_sandbox", "destroy_sandbox", "extend_sandbox", "list_sandboxes",
  "read_file", "run_command", "write_file"]);
for (const t of tools) {
  assert.ok(t.description.length > 40, `${t.name} has a description`);
  assert.equal(t.inputSchema.type, "object");
}
step("tools/list");

// A boot under emulation on a busy 2-core machine can outlast the SDK's
// default 60 s request timeout; the service has its own (180 s boot).
const created = await client.callTool({ name: "create_sandbox",
  arguments: { size: "small", name: `mcp-${mode}`, timeout_minutes: 10 } }, undefined,
  { timeout: 300000 });
assert.equal(created.isError, false, text(created));
const id = created.structuredContent.id;
assert.match(id, /^sbx_[a-z2-7]{20}$/);
assert.equal(created.structuredContent.status, "running");
step(`create_sandbox ${id}`);

const ran = await client.callTool({ name: "run_command",
  arguments: { sandbox_id: id, command: "echo hi; echo oops >&2; id -un; exit 3", env: { A: "1" } } });
assert.equal(ran.isError, false, "a failing command is a normal result");
assert.equal(ran.structuredContent.exit_code, 3);
assert.equal(ran.structuredContent.stdout, "hi\nsandbox\n");
assert.equal(ran.structuredContent.stderr, "oops\n");
assert.match(text(ran), /exit_code: 3/);
step("run_command");

const source = "print('héllo from mcp')\n";
let r = await client.callTool({ name: "write_file",
  arguments: { sandbox_id: id, path: "/workspace/app/hello.py", content: source } });
assert.equal(r.isError, false, text(r));
r = await client.callTool({ name: "read_file", arguments: { sandbox_id: id, path: "/workspace/app/hello.py" } });
assert.equal(r.structuredContent.content, source);
const bytes = Buffer.from([0, 1, 2, 250, 255]).toString("base64");
await client.callTool({ name: "write_file",
  arguments: { sandbox_id: id, path: "/workspace/b.bin", content: bytes, encoding: "base64" } });
r = await client.callTool({ name: "read_file",
  arguments: { sandbox_id: id, path: "/workspace/b.bin", encoding: "base64" } });
assert.equal(r.structuredContent.content, bytes);
r = await client.callTool({ name: "run_command",
  arguments: { sandbox_id: id, command: "python3 hello.py", cwd: "/workspace/app" } });
assert.equal(r.structuredContent.stdout, "héllo from mcp\n");
step("write_file / read_file");

r = await client.callTool({ name: "extend_sandbox", arguments: { sandbox_id: id, additional_minutes: 5 } });
assert.equal(r.isError, false, text(r));
assert.equal(r.structuredContent.timeout_minutes, 15);
r = await client.callTool({ name: "list_sandboxes", arguments: { status: "running" } });
assert.ok(r.structuredContent.sandboxes.some((s) => s.id === id));
step("extend_sandbox / list_sandboxes");

// Tool errors: isError with a message an agent can act on.
const expectToolError = async (name, args, pattern) => {
  const res = await client.callTool({ name, arguments: args });
  assert.equal(res.isError, true, `${name} ${JSON.stringify(args)} should fail`);
  assert.match(text(res), pattern);
};
await expectToolError("run_command", { sandbox_id: "sbx_aaaaaaaaaaaaaaaaaaaa", command: "true" }, /no sandbox/);
await expectToolError("run_command", { sandbox_id: id }, /command is required/);
await expectToolError("run_command", { sandbox_id: id, command: "true", timeout_ms: 0 }, /timeout_ms/);
await expectToolError("create_sandbox", { size: "huge" }, /unknown size|size/);
await expectToolError("write_file", { sandbox_id: id, path: "/etc/passwd", content: "x" }, /forbidden|permission/i);
await expectToolError("read_file", { sandbox_id: id, path: "relative.txt" }, /absolute/);
step("tool errors are isError");

// Credit used up is a tool error too, with the reason.
const broke = await connect(brokeKey);
const refused = await broke.callTool({ name: "create_sandbox", arguments: {} });
assert.equal(refused.isError, true);
assert.equal(refused.structuredContent.error.type, "insufficient_credit");
assert.match(text(refused), /credit/);
await broke.close();
step("no credit is isError");

// Protocol errors: an unknown tool is a JSON-RPC error.
await assert.rejects(client.callTool({ name: "format_disk", arguments: {} }),
  (e) => e instanceof McpError && e.code === -32602 && /unknown tool/.test(e.message));
step("unknown tool is a JSON-RPC error");

r = await client.callTool({ name: "destroy_sandbox", arguments: { sandbox_id: id } });
assert.equal(r.structuredContent.status, "destroyed");
r = await client.callTool({ name: "destroy_sandbox", arguments: { sandbox_id: id } });
assert.equal(r.structuredContent.status, "destroyed", "destroy twice is harmless");
await expectToolError("run_command", { sandbox_id: id, command: "true" }, /destroyed/);
step("destroy_sandbox");
await client.close();

// A wrong key cannot connect.
await assert.rejects(connect("sc_" + "a".repeat(40)));
step("wrong key refused");

if (mode === "http") {
  await assert.rejects(connect(key, { Origin: "http://evil.example" }),
    (e) => e.code === 403 && /Origin/.test(e.message));
  step("bad Origin refused");
  const post = (body, headers = {}) => fetch(`${base}/mcp`, { method: "POST", body: JSON.stringify(body),
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json",
      Accept: "application/json, text/event-stream", ...headers } });
  for (const version of ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]) {
    const res = await post({ jsonrpc: "2.0", id: 1, method: "initialize", params: {
      protocolVersion: version, capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).result.protocolVersion, version);
  }
  step("initialize with each protocol revision");
  let res = await post({ jsonrpc: "2.0", id: 2, method: "tools/list" });
  assert.equal(res.status, 400, "no session");
  res = await post({ jsonrpc: "2.0", id: 2, method: "tools/list" }, { "Mcp-Session-Id": "nope" });
  assert.equal(res.status, 404, "unknown session");
  res = await fetch(`${base}/mcp`, { method: "POST", body: "{not json", headers: { Authorization: `Bearer ${key}` } });
  assert.equal((await res.json()).error.code, -32700);
  res = await fetch(`${base}/mcp`, { headers: { Authorization: `Bearer ${key}` } });
  assert.equal(res.status, 405);
  const init = await post({ jsonrpc: "2.0", id: 1, method: "initialize", params: {
    protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
  const session = init.headers.get("mcp-session-id");
  res = await post({ jsonrpc: "2.0", id: 3, method: "no/such" }, { "Mcp-Session-Id": session });
  assert.equal((await res.json()).error.code, -32601);
  res = await fetch(`${base}/mcp`, { method: "DELETE", headers: { Authorization: `Bearer ${key}`, "Mcp-Session-Id": session } });
  assert.equal(res.status, 200);
  res = await post({ jsonrpc: "2.0", id: 4, method: "ping" }, { "Mcp-Session-Id": session });
  assert.equal(res.status, 404, "a terminated session is gone");
  step("sessions, parse errors, unknown methods, GET 405");
} else {
  // The service is not running at that address: a clear error, not a hang.
  await assert.rejects(connect(key, {}, "http://127.0.0.1:9"), /not running/);
  step("service not running is reported");
}
console.log(`all ${mode} checks passed`);
process.exit(0);
