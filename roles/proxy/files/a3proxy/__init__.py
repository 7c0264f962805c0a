# -*- coding: utf-8 -*-
# Managed by the ascend.vllm_pd collection (role proxy): an honest front for vllm-ascend's proxy.
"""a3proxy: the honest wrapper around vllm-ascend's load_balance_proxy_server_example.py (v0.18.0).

The upstream example stays the engine of the proxy: main imports it by path, lets it parse its own command
line, runs its lifespan (which builds its ProxyState) and forwards the completions to its FastAPI app.
What the package adds, one module per job:

  cli       the wrapper's own --a3-* options, split from the upstream's arguments
  answers   what a client gets: answer classification, OpenAI-style error bodies, SSE tails, address scrubbing
  health    the prober's view of a backend (BackendHealth) and the /healthcheck decisions (full and public)
  rotation  drain, selection among undrained backends, the upstream's load counters and the per-request ledger
  metrics   the Prometheus text of /metrics
  auth      the secrets file, bearer tokens compared in constant time
  limits    body cap, body read timeout, the open-request limit, the header timeout of a connection
  etcd      the etcd address (http or https with a client certificate) and the workers' registrations
  engine    the upstream script: import, argument parsing, httpx hooks on its backend clients, one request
  core      ProbingCore (prober, drain, health, /v1/models, metrics: what every engine shares) and HonestProxy
            (the upstream engine: its rotation, selection, forwarding of completions)
  router    RouterCore (--a3-engine vllm-router): vllm-router as the child, the backends registered with it
  apps      the two ASGI apps: the public listener and the admin listener
  server    two uvicorn servers on one event loop
  main      the command line entry (a3_proxy.py next to this package calls it)

cli, answers, health, rotation, metrics, auth, limits, etcd and apps import nothing outside the standard
library (apps and limits use asyncio only): they are unit-tested without fastapi, httpx or uvicorn. engine,
core and server import httpx and uvicorn when the proxy runs.
"""

UPSTREAM_FILE = "load_balance_proxy_server_example.py"
UPSTREAM_MODULE = "load_balance_proxy_server_example"
ROLES = ("prefill", "decode")
COMPLETION_PATHS = ("/v1/completions", "/v1/chat/completions")
