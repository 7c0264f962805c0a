#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wall time of the preflight role versus the seed's shell loops translated naively into Ansible.

Prints numbers; it is not a test. Both playbooks run against the same inventory (default: the
simulated cluster, 4 nodes x 16 NPUs, sim/cluster.sh up) with the checkout's ansible.cfg:

  role   benchmarks/preflight_role.yml = playbooks/preflight.yml (groups play + role preflight): npu-smi,
         hccn_check pass 1 (vnic, link, net_health, tls, ip for 16 devices in parallel), TLS compared
         across nodes, hccn_check pass 2 (hccs_ping to the same device of the 3 other nodes), and every
         host check (page size, memory, versions, files, docker, NIC, ports).
  naive  benchmarks/naive_preflight.yml: npu-smi info, then one task execution per device per check:
         hccn_tool -i N -vnic -g / -link -g / -net_health -g / -tls -g / -hccs_ping -g address <peer>
         (one peer per device, the seed's loop), nothing else.

The naive playbook does less work (one peer instead of three, no host checks, no judging), so the
ratio understates the role's advantage.

  .venv/bin/python benchmarks/preflight_bench.py [-i inventories/sim] [--runs 3] [--pipelining]
                                                 [--tool-delay-ms '{"*": 100, "hccs_ping": 1000}']

--tool-delay-ms models the latency of the real tools on the simulated nodes (the simulated tools
answer at once): it writes a delay file to /tmp on each node and points the simulated tools at it
through A3SIM_FAULTS_FILE for these runs only (the shared /etc/a3sim/faults.json is not touched),
then removes it. --pipelining sets ANSIBLE_PIPELINING=True for both playbooks.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLAYBOOK = {"role": ROOT / "benchmarks" / "preflight_role.yml", "naive": ROOT / "benchmarks" / "naive_preflight.yml"}
DELAY_FILE = "/tmp/a3sim-bench-delay.json"


def ansible_bin(name: str) -> str:
    local = ROOT / ".venv" / "bin" / name
    return str(local) if local.exists() else name


def env_for(args) -> dict:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0")
    if args.pipelining:
        env["ANSIBLE_PIPELINING"] = "True"
    return env


def inventory_shape(args) -> tuple[list, int]:
    out = subprocess.run([ansible_bin("ansible-inventory"), "-i", args.inventory, "--list"], cwd=ROOT,
                         env=env_for(args), capture_output=True, text=True, check=True).stdout
    inv = json.loads(out)
    hosts = []
    for group in ("prefill", "decode"):
        hosts += inv.get(group, {}).get("hosts", [])
    hostvars = inv.get("_meta", {}).get("hostvars", {})
    npus = sorted({int(hostvars.get(h, {}).get("a3_npus_per_node", 16)) for h in hosts} or {0})
    return hosts, npus[-1]


def adhoc(args, module: str, module_args: str) -> None:
    subprocess.run([ansible_bin("ansible"), "prefill:decode", "-i", args.inventory, "-m", module, "-a", module_args],
                   cwd=ROOT, env=env_for(args), capture_output=True, text=True, check=True)


def run_playbook(args, kind: str, extra: dict, log_dir: Path, index: int) -> tuple[float, int, Path]:
    log = log_dir / ("%s-%d.log" % (kind, index))
    cmd = [ansible_bin("ansible-playbook"), "-i", args.inventory, str(PLAYBOOK[kind])]
    if extra:
        cmd += ["-e", json.dumps(extra)]
    start = time.monotonic()
    with log.open("w") as handle:
        rc = subprocess.run(cmd, cwd=ROOT, env=env_for(args), stdout=handle, stderr=subprocess.STDOUT,
                            check=False).returncode
    return time.monotonic() - start, rc, log


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-i", "--inventory", default="inventories/sim", help="inventory (default: inventories/sim)")
    parser.add_argument("--runs", type=int, default=1, help="runs of each playbook, alternating (default 1)")
    parser.add_argument("--pipelining", action="store_true", help="ANSIBLE_PIPELINING=True for both playbooks")
    parser.add_argument("--tool-delay-ms", default="",
                        help='modelled tool latency, JSON for the simulated tools\' delay_ms, e.g. \'{"*": 100, '
                             '"hccs_ping": 1000}\' (ms per command; default: none)')
    args = parser.parse_args()

    hosts, npus = inventory_shape(args)
    print("inventory %s: %d nodes (%s) x %d NPUs; ansible.cfg %s; pipelining %s; tool delay %s"
          % (args.inventory, len(hosts), ", ".join(hosts), npus, ROOT / "ansible.cfg",
             "on" if args.pipelining else "as configured", args.tool_delay_ms or "none (simulated tools answer at once)"))
    per_node_naive = 1 + 5 * npus
    print("naive: %d task executions per node (npu-smi + 5 checks x %d devices), %d in all"
          % (per_node_naive, npus, per_node_naive * len(hosts)))

    extra = {}
    if args.tool_delay_ms:
        delay = json.loads(args.tool_delay_ms)
        adhoc(args, "ansible.builtin.copy", "dest=%s mode=0644 content=%s"
              % (DELAY_FILE, json.dumps(json.dumps({"delay_ms": delay}))))
        extra = {"bench_env": {"A3SIM_FAULTS_FILE": DELAY_FILE}}

    log_dir = Path(tempfile.mkdtemp(prefix="preflight-bench-"))
    times = {"role": [], "naive": []}
    failed = []
    try:
        for index in range(args.runs):
            for kind in ("role", "naive"):
                seconds, rc, log = run_playbook(args, kind, extra, log_dir, index)
                times[kind].append(seconds)
                print("run %d %-5s %7.1f s  rc %d  (%s)" % (index + 1, kind, seconds, rc, log))
                if rc != 0:
                    failed.append("%s run %d rc %d (see %s)" % (kind, index + 1, rc, log))
                sys.stdout.flush()
    finally:
        if args.tool_delay_ms:
            adhoc(args, "ansible.builtin.file", "path=%s state=absent" % DELAY_FILE)

    role, naive = statistics.median(times["role"]), statistics.median(times["naive"])
    print("")
    print("preflight role (4 phases, all checks):   %7.1f s  (median of %d; min %.1f s)"
          % (role, len(times["role"]), min(times["role"])))
    print("naive seed loops (NPU checks only):      %7.1f s  (median of %d; min %.1f s)"
          % (naive, len(times["naive"]), min(times["naive"])))
    print("ratio naive / role:                      %7.1fx  (target >= 10x)" % (naive / role))
    if failed:
        print("WARNING: some runs failed, their times do not measure a full run: " + "; ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
