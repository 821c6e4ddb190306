#!/usr/bin/env bash
# The reference service's bash curl/jq flow (seeds, "The loop, end to
# end"), with only the base URL and key changed (from the environment).
# Step 0 (not in the seed) writes the task.py the seed's step 2 runs.
set -euo pipefail
API="$SANDCASTLE_API"   # was https://sandbox-as-a-service.com/v1

# Create the workspace for this run
SBX=$(curl -sX POST $API/sandboxes \
-H "Authorization: Bearer $AAS_API_KEY" \
-H "Content-Type: application/json" \
-d '{"size":"small","timeout_minutes":30}' | jq -r .id)
echo "sandbox=$SBX"

# Step 0 - the task the seed runs in step 2
curl -sX POST $API/sandboxes/$SBX/exec \
-H "Authorization: Bearer $AAS_API_KEY" \
-H "Content-Type: application/json" \
-d '{"command":"printf '\''import os\\nprint(\"task\", os.environ[\"TASK_ID\"])\\n'\'' > task.py"}' | jq -r '"step0=\(.exit_code)"'

# Step 1 — set up
curl -sX POST $API/sandboxes/$SBX/exec \
-H "Authorization: Bearer $AAS_API_KEY" \
-H "Content-Type: application/json" \
-d '{"command":"pip install --user -q httpx","timeout_ms":180000}' | jq -r '"step1=\(.exit_code)"'

# Step 2 — run what the model wrote, with its own env
curl -sX POST $API/sandboxes/$SBX/exec \
-H "Authorization: Bearer $AAS_API_KEY" \
-H "Content-Type: application/json" \
-d '{"command":"python3 task.py","cwd":"/home/sandbox","env":{"TASK_ID":"42"}}' | jq -r '"step2=\(.exit_code) \(.stdout)"'

# Done
curl -sX DELETE $API/sandboxes/$SBX \
-H "Authorization: Bearer $AAS_API_KEY" | jq -r '"deleted=\(.status)"'
