#!/usr/bin/env python3
"""Numbers for the simulated cluster (a script that prints numbers, not a test):
cold and warm image build time, first converge wall time of the four nodes, idempotent rerun wall
time, and the peak memory of the whole simulation (host memory in use above the baseline measured
before the nodes start, sampled every 0.5 s).

    benchmarks/sim_bench.py            # warm build + converge + rerun
    benchmarks/sim_bench.py --cold     # also a cold build: removes the a3sim images and a fresh cache dir

It takes the cluster down first and leaves it up at the end (sim/cluster.sh down removes it)."""
from __future__ import annotations

import argparse
import os
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


def timed(argv, env=None) -> float:
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env or ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    took = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit("%s failed (rc %d):\n%s" % (" ".join(argv), proc.returncode, proc.stdout[-4000:]))
    return took


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
    rows.append(("first converge, 4 nodes (site.yml)", timed(["ansible-playbook", "site.yml", "-i", "inventories/sim"])))
    rows.append(("idempotent rerun (site.yml)", timed(["ansible-playbook", "site.yml", "-i", "inventories/sim"])))
    peak.stop.set()
    peak.join()
    width = max(len(r[0]) for r in rows)
    for name, secs in rows:
        print(f"{name:<{width}} {secs:8.1f} s")
    label = "peak memory of the simulation"
    print(f"{label:<{width}} {peak.peak - baseline:8.0f} MiB (host memory in use above the {baseline:.0f} MiB baseline)")


if __name__ == "__main__":
    main()
