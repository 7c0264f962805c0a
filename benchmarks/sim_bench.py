#!/usr/bin/env python3
"""Numbers for the simulated cluster (a script that prints numbers, not a test):
cold and warm image build time, first converge wall time of the four nodes, idempotent rerun wall
time (and its changed count; the fast path when every node matches its last converge) and the same rerun with every
role (-e a3_fast_path=false), playbooks/status.yml wall time and the ratio rerun/status, the sum of the
unavoidable waits of the first converge on the slowest node (image pull, etcd health, worker registration,
engine health, proxy health, gate requests, Prometheus targets; the time covered by at least one of them, the
background image pull from its start to the node's docker pull event) with the ratio first converge/waits, and the
peak memory of the whole simulation (host memory in use above the baseline measured before the nodes start,
sampled every 0.5 s), how busy the host's CPUs were during the first converge (/proc/stat) and the host's speed
(a pure-Python loop: numbers of runs far apart compare only at similar speeds). Task times per host come from
benchmarks/callback/a3_timings.py.

    benchmarks/sim_bench.py            # warm build + converge + rerun
    benchmarks/sim_bench.py --cold     # also a cold build: removes the a3sim images and a fresh cache dir

It takes the cluster down first and leaves it up at the end (sim/cluster.sh down removes it)."""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PATH="%s:%s" % (ROOT / ".venv" / "bin", os.environ["PATH"]), ANSIBLE_NOCOLOR="1")


def used_mib() -> float:
    info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())

    def kib(key):
        return int(info[key].split()[0])

    return (kib("MemTotal") - kib("MemAvailable")) / 1024


class Peak(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.peak, self.stop = used_mib(), threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, used_mib())
            time.sleep(0.5)


def cpu_jiffies():
    """(busy, total) jiffies of all CPUs since boot (first line of /proc/stat; idle and iowait are not busy)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def loop_seconds(n=10 ** 7) -> float:
    """Seconds of a pure-Python loop of n additions: the host's speed at the time of the run."""
    start, total = time.perf_counter(), 0
    for i in range(n):
        total += i
    return time.perf_counter() - start


# Tasks that wait on something outside Ansible (a download, a service coming up, a request): the part of a
# converge no amount of task-overhead tuning removes. Besides the generic names:
# - the worker's restart handler: its unit is active only once dscli start reported the worker ready
#   (ExecStartPost), so systemctl restart blocks for the worker's registration, the wait the etcd poll after it
#   used to carry alone;
# - the two pip installs in the container (the seed's pinned versions, the openYuanrong wheel): pip resolving,
#   downloading and installing from the package index, the same kind of wait as the image pull.
WAITS = re.compile(r"(^|: )(Pull |Download |Wait |Send |Probe /|Check each rank|Restart the openYuanrong worker$"
                   r"|Install the pinned versions the seed asks for$|Install and import-check openyuanrong-datasystem )")
# A wait that runs in the background: from the task that starts it to the end of the task that waits for it
# (the container role's image pull; the etcd play runs in between).
BACKGROUND = ((re.compile(r": Start pulling the image in the background: "), re.compile(r": Wait for the background pull of ")),)


def run(argv, env=None):
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env or ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    took = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit("%s failed (rc %d):\n%s" % (" ".join(argv), proc.returncode, proc.stdout[-4000:]))
    return took, proc.stdout


def timed(argv, env=None) -> float:
    return run(argv, env)[0]


def changed(output) -> int:
    return sum(int(n) for n in re.findall(r"^\S+\s+: ok=\d+\s+changed=(\d+)", output, re.M))


def waits_of_slowest_node(path, pulled=None):
    """(host, busy seconds, wait seconds, [(task, seconds)] of its waits) for the node with the most task time.
    The wait seconds are the time covered by at least one wait (a background pull and the tasks that ran beside
    it are counted once). pulled: {host: epoch seconds the node's docker finished the pull}, when known (the
    background pull's wait task may end well after the pull did)."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    busy, waits, started = {}, {}, {}
    for row in sorted(rows, key=lambda r: r["start"]):
        host = row["host"]
        if host == "localhost":
            continue
        busy[host] = busy.get(host, 0.0) + row["end"] - row["start"]
        if row["status"] == "skipped":
            continue
        for begin, finish in BACKGROUND:
            if begin.search(row["task"]):
                started[(host, finish)] = row
            elif finish.search(row["task"]) and (host, finish) in started:
                first = started.pop((host, finish))
                end = min(row["end"], (pulled or {}).get(host, row["end"]))
                waits.setdefault(host, []).append(("%s, until the pull ended (in the background)" % first["task"],
                                                   first["start"], max(end, first["start"])))
                break
        else:
            if WAITS.search(row["task"]):
                waits.setdefault(host, []).append((row["task"], row["start"], row["end"]))
    host = max(busy, key=busy.get)
    mine = waits.get(host, [])
    return host, busy[host], covered([(start, end) for _task, start, end in mine]), [(t, end - start) for t, start, end in mine]


def pull_ends(hosts, since, until):
    """{host: epoch seconds of the last image pull its docker engine finished between since and until} (docker
    events of the node; the simulated node of host h is the container a3sim-h)."""
    ends = {}
    for host in hosts:
        out = subprocess.run(["docker", "exec", "a3sim-%s" % host, "docker", "events", "--since", "%.3f" % since,
                              "--until", "%.3f" % until, "--filter", "event=pull", "--format", "{{.TimeNano}}"],
                             capture_output=True, text=True, check=False).stdout.split()
        if out:
            ends[host] = int(out[-1]) / 1e9
    return ends


def covered(spans):
    """Seconds covered by the union of (start, end) spans."""
    total, reach = 0.0, None
    for start, end in sorted(spans):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cold", action="store_true", help="also measure a build from nothing")
    args = ap.parse_args()
    timed(["./setup.sh"])
    timed(["sim/cluster.sh", "down"])
    rows = []
    if args.cold:
        images = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True,
                                text=True, check=True).stdout.split()
        doomed = [i for i in images if i.startswith(("a3sim/", "127.0.0.1:5000/ascend/"))]
        if doomed:
            subprocess.run(["docker", "rmi", "-f", *doomed], capture_output=True, check=False)
        cache = tempfile.mkdtemp(prefix="a3sim-cold-")
        rows.append(("cold image build (no images, empty cache)",
                     timed(["sim/cluster.sh", "build"], dict(ENV, A3SIM_CACHE_DIR=cache))))
        shutil.rmtree(cache, ignore_errors=True)
    rows.append(("warm image build (everything cached)", timed(["sim/cluster.sh", "build"])))
    baseline = used_mib()
    peak = Peak()
    peak.start()
    rows.append(("node start (sim/cluster.sh up)", timed(["sim/cluster.sh", "up"])))
    timings = Path(tempfile.mkdtemp(prefix="a3-timings-")) / "first-converge.jsonl"
    since, jiffies = time.time(), cpu_jiffies()
    first = timed(["ansible-playbook", "site.yml", "-i", "inventories/sim"],
                  dict(ENV, ANSIBLE_CALLBACK_PLUGINS=str(ROOT / "benchmarks" / "callback"),
                       ANSIBLE_CALLBACKS_ENABLED="a3_timings", A3_TIMINGS_FILE=str(timings)))
    rows.append(("first converge, 4 nodes (site.yml)", first))
    cpu_busy, cpu_total = (now - then for now, then in zip(cpu_jiffies(), jiffies))
    busy_share = cpu_busy / max(1, cpu_total)
    pulled = pull_ends(("p0", "p1", "d0", "d1"), since, time.time())
    rerun, out = run(["ansible-playbook", "site.yml", "-i", "inventories/sim"])
    (timings.parent / "rerun.log").write_text(out)  # what a rerun that changed something changed
    path = "fast path" if "fast path: every node matches" in re.sub(r"\s+", " ", out) else "every role"
    rows.append(("no-op rerun (site.yml, %s), changed=%d" % (path, changed(out)), rerun))
    forced, out = run(["ansible-playbook", "site.yml", "-i", "inventories/sim", "-e", "a3_fast_path=false"])
    (timings.parent / "rerun-every-role.log").write_text(out)
    rows.append(("no-op rerun of every role (-e a3_fast_path=false), changed=%d" % changed(out), forced))
    status = timed(["ansible-playbook", "playbooks/status.yml", "-i", "inventories/sim"])
    rows.append(("status (playbooks/status.yml)", status))
    peak.stop.set()
    peak.join()
    host, busy, wait, tasks = waits_of_slowest_node(timings, pulled)
    rows.append(("unavoidable waits of the first converge on %s" % host, wait))
    width = max(len(r[0]) for r in rows)
    for name, secs in rows:
        print(f"{name:<{width}} {secs:8.1f} s")
    label = "peak memory of the simulation"
    print(f"{label:<{width}} {peak.peak - baseline:8.0f} MiB (host memory in use above the {baseline:.0f} MiB baseline)")
    print(f"{'CPU busy during the first converge':<{width}} {100 * busy_share:8.0f} % of {os.cpu_count()} CPUs")
    print(f"{'host speed (Python loop of 10^7 additions)':<{width}} {loop_seconds():8.2f} s")
    print(f"{'ratio no-op rerun / status':<{width}} {rerun / status:8.1f}   (target: at most 5)")
    print(f"{'ratio first converge / waits':<{width}} {first / wait if wait else float('inf'):8.1f}   (target: at most 2)")
    print("\nwaits on %s (task time on that node %.1f s):" % (host, busy))
    for task, took in sorted(tasks, key=lambda t: -t[1]):
        print(f"  {took:7.1f} s  {task}")
    print("\ntask times of the first converge and the reruns' output: %s" % timings.parent)


if __name__ == "__main__":
    main()
