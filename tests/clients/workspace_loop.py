"""The reference service's Python `Workspace` loop (seeds, "The loop, end to
end"), unchanged but for the base URL and key, which come from the
environment. The model is replaced by a scripted agent that first writes a
bug and then fixes it after reading stderr, so the loop runs its repair
path. Prints one JSON line with what happened."""
import json
import os
import requests

API = os.environ["SANDCASTLE_API"]  # was "https://sandbox-as-a-service.com/v1"
H = {"Authorization": f"Bearer {os.environ['AAS_API_KEY']}"}

class Workspace:
    """One sandbox for the lifetime of one agent run."""
    def __enter__(self):
        self.id = requests.post(f"{API}/sandboxes", headers=H, json={
            "size": "small",
            "timeout_minutes": 30,
        }).json()["id"]
        return self
    def run(self, command, timeout_ms=120_000, cwd="/home/sandbox"):
        r = requests.post(f"{API}/sandboxes/{self.id}/exec", headers=H, json={
            "command": command,
            "timeout_ms": timeout_ms,
            "cwd": cwd,
        }).json()
        # Feed stderr back to the model — that is where the repair signal is.
        return r["stdout"], r["stderr"], r["exit_code"]
    def __exit__(self, *_):
        requests.delete(f"{API}/sandboxes/{self.id}", headers=H)

class ScriptedAgent:
    """Writes a bug first; fixes it once stderr shows the NameError."""
    def __init__(self):
        self.observed = []
    def write_code(self, context):
        if context and "NameError" in context.get("stderr", ""):
            return "nums = [1, 2, 3]\nprint('sum=%d' % sum(nums))"
        return "print('sum=%d' % sum(numbers))"
    def observe(self, stdout, stderr, exit_code):
        self.observed.append(exit_code)
        return {"stdout": stdout, "stderr": stderr, "exit_code": exit_code}

agent = ScriptedAgent()
context = None
report = {}
with Workspace() as ws:
    report["sandbox"] = ws.id
    # Both need the network, which arrives with the egress issue; their
    # failure must not stop the loop, exactly as in the seed.
    report["clone_exit"] = ws.run("git clone --depth 1 https://github.com/psf/requests repo")[2]
    report["venv_exit"] = ws.run("python3 -m venv .venv && .venv/bin/pip install -q -e ./repo", timeout_ms=300_000)[2]
    for attempt in range(5):
        code = agent.write_code(context) # your model call
        out, err, status = ws.run(
            f"cat > /home/sandbox/task.py <<'PY'\n{code}\nPY\n"
            ".venv/bin/python /home/sandbox/task.py"
        )
        if status == 0:
            break
        context = agent.observe(stdout=out, stderr=err, exit_code=status)
    report.update(attempts=attempt + 1, final_exit=status, stdout=out, failed_exits=agent.observed)
report["after_delete"] = requests.get(f"{API}/sandboxes/{report['sandbox']}", headers=H).json()["status"]
print(json.dumps(report))
