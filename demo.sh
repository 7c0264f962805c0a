#!/usr/bin/env bash
# The main job on the simulated A3 cluster: set up the controller, build what is missing, start the
# four simulated nodes, deploy with `ansible-playbook site.yml -i inventories/sim`, and finish with a
# chat completion answered through the proxy. `sim/cluster.sh down` removes everything again.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
sim/cluster.sh up
.venv/bin/ansible-playbook site.yml -i inventories/sim "$@"
proxy=$(.venv/bin/ansible-inventory -i inventories/sim --host p0 | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["a3_business_ip"])')
echo
echo "=== POST http://$proxy:8088/v1/chat/completions (the seed's test request)"
curl -sS -H 'Content-Type: application/json' -X POST "http://$proxy:8088/v1/chat/completions" \
  -d '{"model": "glm-5.1", "messages": [{"role": "user", "content": "你好"}], "stream": false, "temperature": 0, "max_tokens": 256}' |
  .venv/bin/python -c 'import json,sys; r=json.load(sys.stdin); print(r["choices"][0]["message"]["content"]); print("usage:", r["usage"])'
