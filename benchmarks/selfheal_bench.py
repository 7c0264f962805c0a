#!/usr/bin/env python3
"""Self-healing under load on the running simulated cluster: prints one table row per fault.

    .venv/bin/python benchmarks/selfheal_bench.py [--only decode] [--clients 3] [--restart-node p0] [--json F]

Needs a converged cluster (./demo.sh). For each fault in turn (kill -9 a decode rank, a prefill rank,
hang a decode rank, kill a datasystem worker, etcd, the proxy, restart a node container, restart the
yr_glm5 container) it runs a bounded load through the proxy, injects the fault, repairs nothing, and
measures: requests sent, good answers, honest errors (with Retry-After), empty 200s, connection
errors, timeouts, seconds to the first good answer after the fault, the longest gap without one, and
seconds until the cluster is healthy again with the faulty part replaced. The molecule scenario
selfheal asserts on the same numbers; this prints them (README, "Self-healing").
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sim", "lib"))
import faultsuite  # noqa: E402

if __name__ == "__main__":
    sys.exit(faultsuite.main())
