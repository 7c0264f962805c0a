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
ratio understates the role's advantage. The seed itself loops only -vnic and -hccs_ping; -link,
-net_health and -tls come from the A3 checklist of vllm-ascend's PD deployment tutorial, which the role also covers.

Which comparison is the issue's target (>= 10x): "etasks" (--equal-work --naive-tasks), the naive
equivalent of what the role checks, one Ansible task per device per check. The others bound it: "naive"
and "tasks" check less than the role does (the seed's peer loop), "equal" writes the same checks as
loops (a loop item costs less than a task).

  .venv/bin/python benchmarks/preflight_bench.py [-i inventories/sim] [--runs 3] [--warmup 1] [--pipelining]
        [--equal-work] [--naive-tasks] [--tool-delay-ms '{"*": 100, "hccs_ping": 1000}' | --sweep-ms 0,100,500]

--equal-work also times the naive playbook doing the role's NPU coverage (-ip -g too, and hccs_ping to
the same device of every other node instead of one), as a third number; --naive-tasks times the naive
checks written literally as one separate task per device and check (a loop item is cheaper than a task).
Both together add "etasks": the role's NPU coverage written as one task per device per check, which is
the issue's "naive equivalent" read literally (the same checks, one Ansible task per device per check).

The role and the largest naive playbook first run --warmup times untimed (printed as warm-up): the
simulated tools answer a repeated call from a cache (a few ms, like the compiled tools; a first call
starts Python, ~20 ms), and the warm-up fills it with every command both sides run.

The simulated tools answer at once; the real ones wait on the driver and the fabric, by an amount we
cannot measure without hardware. --tool-delay-ms models it: it writes a delay file to /tmp on each node
and points the simulated tools at it through A3SIM_FAULTS_FILE for these runs only (the shared
/etc/a3sim/faults.json is not touched), then removes it. --sweep-ms measures several uniform latencies
in turn and prints one table. --pipelining sets ANSIBLE_PIPELINING=True for both playbooks.

Where the time goes (the model behind the numbers): the naive loop costs one Ansible task execution per
device and check, one after another (81 per node, 129 for the role's coverage), each paying the tool's
latency; the role costs a fixed number of round trips per node (npu-smi, hccn pass 1, hccn pass 2, one
host read) plus, per device in parallel, 5 queries and 3 pings in a row (commands on one device do not
overlap). With a uniform latency L per command the latency part is 81 L or 129 L against 1 + 5 + 3 = 9 L,
so as L grows the ratio tends to 9x against the seed's loop (the role pings three peers per device
where the seed pings one) and 14x against equal coverage. At small L the machine's CPU decides: on 2
cores shared by the controller and four nodes the naive loop's 324 task executions cost ~0.58 s each.
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
PLAYBOOK = {"role": ROOT / "benchmarks" / "preflight_role.yml", "naive": ROOT / "benchmarks" / "naive_preflight.yml",
            "equal": ROOT / "benchmarks" / "naive_preflight.yml", "tasks": None, "etasks": None}
LABEL = {"role": "preflight role (all checks, 4 phases)",
         "naive": "naive seed loops (NPU checks only)",
         "equal": "naive, same NPU coverage as the role",
         "tasks": "naive, one separate task per device+check",
         "etasks": "naive, same coverage, one task per device+check"}
TASKS_FILE = {"tasks": "naive_tasks.yml", "etasks": "naive_tasks_equal.yml"}
CHECKS = ("vnic", "link", "net_health", "tls")
DELAY_FILE = "/tmp/a3sim-bench-delay.json"


def tasks_playbook(path: Path, npus: int, nodes: int, equal: bool) -> Path:
    """The naive playbook written out literally: one task per device per check (no loops).

    equal=False: the seed's checks (benchmarks/naive_preflight.yml); equal=True: the role's NPU coverage
    (-ip -g too, and hccs_ping to device i of every other node)."""
    checks = CHECKS + (("ip",) if equal else ())
    offsets = range(1, nodes) if equal else [1]
    lines = ["---", "# Generated by benchmarks/preflight_bench.py --naive-tasks: benchmarks/naive_preflight.yml"
             + (" (naive_equal_work=true)" if equal else "") + " with every",
             "# loop item written out as its own task.",
             "- name: Naive NPU checks, one task per device per check", "  hosts: prefill:decode",
             "  gather_facts: false", '  environment: "{{ bench_env | default({}) }}"', "  tasks:",
             "    - name: Run npu-smi info", "      ansible.builtin.command: npu-smi info", "      changed_when: false"]
    for check in checks:
        for dev in range(npus):
            lines += ["    - name: Run hccn_tool -i %d -%s -g" % (dev, check),
                      '      ansible.builtin.command: "hccn_tool -i %d -%s -g"' % (dev, check),
                      "      changed_when: false"]
            if check == "vnic":
                lines += ["      register: naive_vnic_%d" % dev]
    for offset in offsets:
        peer = ("{{ hostvars[ansible_play_hosts[(ansible_play_hosts.index(inventory_hostname) + %d)"
                " %% (ansible_play_hosts | length)]]" % offset)
        for dev in range(npus):
            lines += ["    - name: Run hccn_tool -i %d -hccs_ping -g address <NPU IP of the node +%d>" % (dev, offset),
                      "      ansible.builtin.command: >-",
                      "        hccn_tool -i %d -hccs_ping -g address %s.naive_vnic_%d.stdout"
                      " | regex_search('vnic ipaddr:\\s*(\\S+)', '\\1') | first }}" % (dev, peer, dev),
                      "      changed_when: false"]
    path.write_text("\n".join(lines) + "\n")
    return path


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


def run_playbook(args, kind: str, extra: dict, log_dir: Path, index: str) -> tuple[float, int, Path]:
    log = log_dir / ("%s-%s.log" % (kind, index))
    cmd = [ansible_bin("ansible-playbook"), "-i", args.inventory, str(PLAYBOOK[kind] or log_dir / TASKS_FILE[kind])]
    extra = dict(extra, naive_equal_work=True) if kind == "equal" else extra
    if extra:
        cmd += ["-e", json.dumps(extra)]
    start = time.monotonic()
    with log.open("w") as handle:
        rc = subprocess.run(cmd, cwd=ROOT, env=env_for(args), stdout=handle, stderr=subprocess.STDOUT,
                            check=False).returncode
    return time.monotonic() - start, rc, log


def delay_models(args) -> list:
    """[(label, delay_ms value for the simulated tools or None)] in the order they are measured."""
    models = []
    if args.sweep_ms:
        for ms in args.sweep_ms.split(","):
            ms = int(ms)
            models.append(("%d ms/command" % ms, {"*": ms} if ms else None))
    elif args.tool_delay_ms:
        models.append((args.tool_delay_ms, json.loads(args.tool_delay_ms)))
    else:
        models.append(("none", None))
    return models


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("-i", "--inventory", default="inventories/sim", help="inventory (default: inventories/sim)")
    parser.add_argument("--runs", type=int, default=1, help="timed runs of each playbook, alternating (default 1)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed runs of each playbook first (default 1: fills the simulated tools' answer cache)")
    parser.add_argument("--pipelining", action="store_true", help="ANSIBLE_PIPELINING=True for both playbooks")
    parser.add_argument("--equal-work", action="store_true",
                        help="also time the naive playbook doing the role's NPU coverage (-ip -g, hccs_ping to every other node)")
    parser.add_argument("--naive-tasks", action="store_true",
                        help="also time the naive checks written as one separate task per device and check (no loops)")
    parser.add_argument("--tool-delay-ms", default="",
                        help='modelled tool latency, JSON for the simulated tools\' delay_ms, e.g. \'{"*": 100, '
                             '"hccs_ping": 1000}\' (ms per command; default: none)')
    parser.add_argument("--sweep-ms", default="",
                        help="comma-separated latencies (ms per tool command, every command alike), each measured in turn, "
                             "e.g. 0,100,500; overrides --tool-delay-ms")
    args = parser.parse_args()

    hosts, npus = inventory_shape(args)
    models = delay_models(args)
    print("inventory %s: %d nodes (%s) x %d NPUs; ansible.cfg %s; pipelining %s; %d warm-up + %d timed run(s) per playbook"
          % (args.inventory, len(hosts), ", ".join(hosts), npus, ROOT / "ansible.cfg",
             "on" if args.pipelining else "as configured", args.warmup, args.runs))
    per_node_naive = 1 + 5 * npus
    print("naive: %d task executions per node (npu-smi + 5 checks x %d devices), %d in all"
          % (per_node_naive, npus, per_node_naive * len(hosts)))
    kinds = (["role", "naive"] + (["equal"] if args.equal_work else []) + (["tasks"] if args.naive_tasks else [])
             + (["etasks"] if args.equal_work and args.naive_tasks else []))
    if args.equal_work:
        per_node_equal = 1 + (5 + len(hosts) - 1) * npus
        print("naive, same coverage: %d task executions per node (npu-smi + %d devices x (5 checks + %d peers)), %d in all"
              % (per_node_equal, npus, len(hosts) - 1, per_node_equal * len(hosts)))

    log_dir = Path(tempfile.mkdtemp(prefix="preflight-bench-"))
    if args.naive_tasks:
        tasks_playbook(log_dir / TASKS_FILE["tasks"], npus, len(hosts), equal=False)
        if args.equal_work:
            tasks_playbook(log_dir / TASKS_FILE["etasks"], npus, len(hosts), equal=True)
    table = []
    failed = []
    for label, delay in models:
        print("\n== modelled tool latency: %s" % (label if delay else "none (the simulated tools answer at once)"))
        extra = {}
        if delay:
            adhoc(args, "ansible.builtin.copy", "dest=%s mode=0644 content=%s"
                  % (DELAY_FILE, json.dumps(json.dumps({"delay_ms": delay}))))
            extra = {"bench_env": {"A3SIM_FAULTS_FILE": DELAY_FILE}}
        times = dict((kind, []) for kind in kinds)
        try:
            for index in range(args.warmup + args.runs):
                warm = index < args.warmup
                # a warm-up of the role and of the largest naive playbook runs every command the others run
                for kind in [k for k in kinds if not warm or k in ("role", kinds[2] if args.equal_work else "naive")]:
                    seconds, rc, log = run_playbook(args, kind, extra, log_dir, "%s-%d" % (label.split()[0], index))
                    if not warm:
                        times[kind].append(seconds)
                    print("%s %d %-5s %7.1f s  rc %d  (%s)" % ("warm-up" if warm else "run", index + 1, kind, seconds, rc, log))
                    if rc != 0:
                        failed.append("%s %s run %d rc %d (see %s)" % (label, kind, index + 1, rc, log))
                    sys.stdout.flush()
        finally:
            if delay:
                adhoc(args, "ansible.builtin.file", "path=%s state=absent" % DELAY_FILE)
        medians = dict((kind, statistics.median(times[kind])) for kind in kinds)
        for kind in kinds:
            print("%-42s %7.1f s  (median of %d; min %.1f s)"
                  % (LABEL[kind] + ":", medians[kind], len(times[kind]), min(times[kind])))
        for kind in kinds[1:]:
            print("ratio %-36s %7.1fx  (target >= 10x)" % ("%s / role:" % kind, medians[kind] / medians["role"]))
        table.append((label if delay else "none", medians))

    if len(table) > 1:
        print("\n%-16s" % "latency" + "".join("%12s" % kind for kind in kinds)
              + "".join("%14s" % ("%s/role" % kind) for kind in kinds[1:]))
        for label, medians in table:
            print("%-16s" % label + "".join("%11.1fs" % medians[kind] for kind in kinds)
                  + "".join("%13.1fx" % (medians[kind] / medians["role"]) for kind in kinds[1:]))
    if failed:
        print("WARNING: some runs failed, their times do not measure a full run: " + "; ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
