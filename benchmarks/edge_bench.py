#!/usr/bin/env python3
"""What the serving edge costs: the upstream proxy script, the project's proxy, the vllm-router alone, the
collection's vllm-router engine as the proxy role deploys it, and a direct backend, side by side, in front of fake
engines that answer at once (benchmarks/edge_fakes.py), so that only the relay is measured.

  python3 benchmarks/edge_bench.py [--rounds 3] [--seconds 4] [--engines upstream,a3proxy,vllm-router,edge,direct]
                                   [--json PATH]

The engines: `upstream` (vllm-ascend's load_balance_proxy_server_example.py), `a3proxy` (the collection's wrapper
around it, proxy_engine upstream), `vllm-router` (the Rust router alone, with the backends on its command line),
`edge` (proxy_engine vllm-router: haproxy with the role's own configuration, rendered by benchmarks/edge_render.yml,
in front of the router, which the wrapper starts and registers the backends with), `direct` (a decode fake).

From a fresh clone it needs nothing but python3 and the package index: it makes .cache/edge-bench/venv (the
proxy's pinned web stack from requirements.txt, with uvicorn's standard extras and sniffio as a vLLM image has
them), .cache/edge-bench/router-venv (vllm-router, pinned below), and takes the upstream script from the
vllm-ascend sdist that sim/cluster.sh downloads (sim/cluster.sh sdist). `edge` also needs haproxy (Debian's
package: the bench installs it with apt-get when it is missing and it runs as root) and the collection's venv
(./setup.sh, which the bench runs) to render the role's configuration.

Each relay runs alone on the first CPU (`edge`: haproxy, the wrapper and the router together); the fakes and the
load generator share the second (on a machine with one CPU everything shares it, and the table says so). Per round
and relay: non-stream chat answers of 16 tokens from 1, 16, 64 and 256 closed-loop clients (answers/s, p50, p99,
the relay's CPU milliseconds per answer), then streams of 64 tokens from 64 clients (tokens/s relayed, the relay's
CPU seconds per 1,000 tokens). Then the relay starts again free on every CPU, the fakes and the load too, for the
same streams: what the machine relays through it (one Python process uses one CPU at most; haproxy and the router
use every one they get). The fakes and the load run on uvloop (the bench's venv has it) and check an answer with
two regular expressions rather than a JSON parse per event, so that they cost a few microseconds per token, less
than any relay. Every answer is checked (token order, usage, [DONE], the first and last events JSON); a wrong one
counts as an error. The table shows the median of the rounds, and each relay's streamed tokens/s as a multiple of
the collection's Python proxy's; the JSON keeps every round. "added p50" is the relay's p50 at 1 client minus
twice the direct p50 (a relay makes two backend calls, a prefill and a decode).

What it does not measure: real engines (their time per token dwarfs the relay's at the seed's scale), the network,
TLS, and the relays' behaviour under failures (the fault suite does that).
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time
import urllib.request

from edge_fakes import ENGINE_ID  # benchmarks/ is the script's directory, first on sys.path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, ".cache", "edge-bench")
FAKES = os.path.join(ROOT, "benchmarks", "edge_fakes.py")
WRAPPER = os.path.join(ROOT, "roles", "proxy", "files", "a3_proxy.py")
UPSTREAM_MEMBER = "examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py"


def _router_pin():
    """The pin the proxy role installs (roles/proxy/defaults/main.yml: proxy_router_package), written there once."""
    with open(os.path.join(ROOT, "roles", "proxy", "defaults", "main.yml"), encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("proxy_router_package:"):
                return line.split(":", 1)[1].split("#", 1)[0].strip()
    raise SystemExit("edge_bench.py: roles/proxy/defaults/main.yml has no proxy_router_package")


ROUTER_PIN = _router_pin()
STACK_EXTRAS = ("sniffio==1.3.1", "uvloop==0.23.0", "httptools==0.9.0")
PREFILL_PORTS = (18101, 18102)
DECODE_PORTS = (18201, 18202)
RELAY_PORT, ADMIN_PORT = 18300, 18399
CLIENTS = (1, 16, 64, 256)
STREAM_CLIENTS, STREAM_TOKENS, TOKENS = 64, 64, 16
ENGINES = ("upstream", "a3proxy", "vllm-router", "edge", "direct")
HARNESS_PYTHON = [sys.executable]  # main() sets the venv's python
EDGE_BASE_PORT = 18310   # proxy_router_base_port of the `edge` engine: router, wrapper, discovery, metrics, stats


def log(msg):
    sys.stderr.write("[edge_bench %s] %s\n" % (time.strftime("%H:%M:%S"), msg))


def pins():
    """The web stack's pins of requirements.txt (fastapi, httpx, uvicorn) and pyzmq (the wrapper registers the
    backends with the router over ZMQ in the `edge` engine)."""
    wanted = {}
    with open(os.path.join(ROOT, "requirements.txt")) as handle:
        for line in handle:
            name = line.split("#")[0].strip()
            for pkg in ("fastapi", "httpx", "uvicorn", "pyzmq"):
                if name.startswith(pkg + "=="):
                    wanted[pkg] = name
    missing = {"fastapi", "httpx", "uvicorn", "pyzmq"} - set(wanted)
    if missing:
        raise SystemExit("requirements.txt lacks a pin of %s" % ", ".join(sorted(missing)))
    return [wanted["fastapi"], wanted["httpx"], wanted["uvicorn"].replace("uvicorn==", "uvicorn[standard]=="),
            wanted["pyzmq"]]


def venv(name, packages):
    path = os.path.join(WORK, name)
    stamp = os.path.join(path, ".installed")
    want = "\n".join(packages)
    if os.path.exists(stamp) and open(stamp).read() == want:
        return os.path.join(path, "bin")
    log("making %s: %s" % (path, " ".join(packages)))
    shutil.rmtree(path, ignore_errors=True)
    subprocess.check_call([sys.executable, "-m", "venv", path])
    pip = subprocess.run([os.path.join(path, "bin", "python"), "-m", "pip", "install", "-q"] + list(packages),
                         capture_output=True, text=True, check=False)
    if pip.returncode:
        raise SystemExit("pip install %s failed:\n%s" % (" ".join(packages), pip.stderr))
    with open(stamp, "w") as handle:
        handle.write(want)
    return os.path.join(path, "bin")


def render_edge():
    """haproxy on PATH (Debian's package, installed when missing and this runs as root) and the role's edge
    configuration for the bench's ports, rendered by Ansible from the role's own files (benchmarks/edge_render.yml)."""
    if shutil.which("haproxy") is None:
        if os.geteuid() != 0:
            raise SystemExit("the edge engine needs haproxy: apt-get install haproxy (or leave `edge` out of --engines)")
        log("installing haproxy (apt-get)")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        # policy-rc.d: the package's maintainer scripts must not start a haproxy daemon on this machine
        policy = "/usr/sbin/policy-rc.d"
        own = not os.path.exists(policy)
        if own:
            with open(policy, "w") as handle:
                handle.write("#!/bin/sh\nexit 101\n")
            os.chmod(policy, 0o755)
        try:
            subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "haproxy"], check=True, env=env,
                           capture_output=True)
        finally:
            if own:
                os.remove(policy)
    subprocess.run([os.path.join(ROOT, "setup.sh")], check=True, cwd=ROOT, capture_output=True)
    playbook = os.path.join(ROOT, ".venv", "bin", "ansible-playbook")
    extra = {"bench_dir": WORK, "proxy_port": RELAY_PORT, "proxy_router_base_port": EDGE_BASE_PORT,
             "proxy_bind_host": "127.0.0.1", "a3_work_dir": WORK, "a3_host_work_dir": WORK,
             "proxy_engine": "vllm-router"}
    out = subprocess.run([playbook, os.path.join(ROOT, "benchmarks", "edge_render.yml"), "-e", json.dumps(extra)],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit("rendering the edge failed:\n" + out.stdout[-3000:])


def upstream_script():
    target = os.path.join(WORK, "load_balance_proxy_server_example.py")
    if os.path.exists(target):
        return target
    sdist = subprocess.run([os.path.join(ROOT, "sim", "cluster.sh"), "sdist"], check=True, capture_output=True,
                           text=True).stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(UPSTREAM_MEMBER))
        data = tar.extractfile(member).read()
    with open(target, "wb") as handle:
        handle.write(data)
    return target


def cpu_set(cpu):
    """CPU `cpu` of this machine (wrapping around on a smaller one), or every CPU for None."""
    ncpu = os.cpu_count() or 1
    return range(ncpu) if cpu is None else {cpu % ncpu}


def pinned(cpu):
    """A new session, on CPU `cpu` (None: on every CPU)."""
    def preexec():
        os.setsid()
        if (os.cpu_count() or 1) > 1:
            os.sched_setaffinity(0, cpu_set(cpu))
    return preexec


def start(argv, cpu, name):
    logfile = open(os.path.join(WORK, name + ".log"), "ab")
    return subprocess.Popen(argv, stdout=logfile, stderr=subprocess.STDOUT, preexec_fn=pinned(cpu), cwd=WORK)


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def cpu_seconds(pid):
    """utime + stime of pid and every process in its session (a launcher's children included)."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == pid:  # session id (field 6; fields here start at field 3)
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def chat_ok(port, direct=False):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    if direct:
        body["kv_transfer_params"] = {"do_remote_prefill": True, "remote_engine_id": ENGINE_ID}
    req = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions" % port, json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as answer:
            return json.loads(answer.read())["choices"][0]["message"]["content"] == " w0 w1 w2 w3"
    except (OSError, ValueError, KeyError, IndexError):
        return False


def relay_argv(engine, bins, script):
    hosts = ["--prefiller-hosts"] + ["127.0.0.1"] * 2 + ["--prefiller-ports"] + [str(p) for p in PREFILL_PORTS] + \
        ["--decoder-hosts"] + ["127.0.0.1"] * 2 + ["--decoder-ports"] + [str(p) for p in DECODE_PORTS]
    common = ["--host", "127.0.0.1", "--port", str(RELAY_PORT)] + hosts
    if engine == "upstream":
        return [os.path.join(bins["stack"], "python"), script] + common
    if engine == "a3proxy":
        return [os.path.join(bins["stack"], "python"), WRAPPER, "--a3-upstream-script", script,
                "--a3-admin-host", "127.0.0.1", "--a3-admin-port", str(ADMIN_PORT)] + common
    if engine == "edge":
        # one session (the CPU accounting and the stop take all of it): haproxy, then the wrapper, whose child the
        # router is; the wrapper's own listener is the edge's control backend, as the role sets it up
        wrapper = [os.path.join(bins["stack"], "python"), WRAPPER, "--a3-upstream-script", script,
                   "--a3-admin-host", "127.0.0.1", "--a3-admin-port", str(ADMIN_PORT),
                   "--a3-engine", "vllm-router", "--a3-router-bin", os.path.join(bins["router"], "vllm-router"),
                   "--a3-router-port", str(EDGE_BASE_PORT), "--a3-router-discovery-port", str(EDGE_BASE_PORT + 2),
                   "--a3-router-metrics-port", str(EDGE_BASE_PORT + 3),
                   "--a3-edge-stats", "http://127.0.0.1:%d/stats;csv" % (EDGE_BASE_PORT + 4),
                   "--host", "127.0.0.1", "--port", str(EDGE_BASE_PORT + 1)] + hosts
        with open(os.path.join(WORK, "edge", "router-args.json"), encoding="utf-8") as handle:
            wrapper += ["--a3-router-arg=" + arg for arg in json.load(handle)]  # the role's policy and router args
        return ["bash", "-c", 'haproxy -W -db -f "$1" & shift; exec "$@"', "_",
                os.path.join(WORK, "edge", "haproxy.cfg")] + wrapper
    if engine == "vllm-router":
        argv = [os.path.join(bins["router"], "vllm-router"), "--vllm-pd-disaggregation", "--host", "127.0.0.1",
                "--port", str(RELAY_PORT), "--policy", "round_robin", "--log-level", "warning"]
        for port in PREFILL_PORTS:
            argv += ["--prefill", "http://127.0.0.1:%d" % port]
        for port in DECODE_PORTS:
            argv += ["--decode", "http://127.0.0.1:%d" % port]
        return argv
    raise ValueError(engine)


def run_load(port, clients, seconds, stream, tokens, direct, cpu=1):
    out = subprocess.run([HARNESS_PYTHON[0], FAKES, "load", "http://127.0.0.1:%d" % port, str(clients), str(seconds),
                          "1" if stream else "0", str(tokens), "1" if direct else "0"],
                         check=True, capture_output=True, text=True, preexec_fn=pinned(cpu))
    return json.loads(out.stdout.strip().splitlines()[-1])


def start_relay(engine, bins, script, cpu):
    """The relay of `engine` on CPU `cpu` (None: every CPU) once it gives a right answer; None for `direct`."""
    direct = engine == "direct"
    port = DECODE_PORTS[0] if direct else RELAY_PORT
    proc = None if direct else start(relay_argv(engine, bins, script), cpu, engine)
    deadline = time.monotonic() + 60
    while not chat_ok(port, direct):
        if proc is not None and proc.poll() is not None:
            raise SystemExit("%s ended with status %s (see %s/%s.log)" % (engine, proc.returncode, WORK, engine))
        if time.monotonic() > deadline:
            if proc is not None:
                stop(proc)
            raise SystemExit("%s gave no right answer within 60 s (see %s/%s.log)" % (engine, WORK, engine))
        time.sleep(0.3)
    run_load(port, 16, 1, False, TOKENS, direct, cpu=None if cpu is None else 1)  # warm-up
    return proc


def cell(engine, proc, seconds, clients, cpu=1):
    """One load of one relay: non-stream answers from `clients` clients, or streams ("stream")."""
    direct = engine == "direct"
    stream = clients == "stream"
    cpu0 = cpu_seconds(proc.pid) if proc else 0.0
    res = run_load(DECODE_PORTS[0] if direct else RELAY_PORT, STREAM_CLIENTS if stream else clients, seconds,
                   stream, STREAM_TOKENS if stream else TOKENS, direct, cpu)
    res["cpu"] = (cpu_seconds(proc.pid) - cpu0) if proc else None
    res["rps"] = res["ok"] / res["seconds"]
    res["tps"] = res["tokens"] / res["seconds"]
    log("%-11s %-7s %8.0f answers/s  %9.0f tokens/s  p50 %7.2f ms  p99 %7.2f ms  errors %d" % (
        engine, ("stream" if stream else "%d cl" % clients) + ("" if cpu is not None else " *"), res["rps"],
        res["tps"], 1000 * (res["p50"] or 0), 1000 * (res["p99"] or 0), res["errors"]))
    return res


def measure(engine, bins, script, seconds, fakes):
    """One round of one engine: {"c<N>": {...}, "stream": {...}, "machine": {...}}. The relay first runs alone on
    the first CPU (the fakes and the load on the second) for every cell; then it runs again free on every CPU, the
    fakes and the load too, for the streams of "machine" (marked * in the log)."""
    proc = start_relay(engine, bins, script, 0)
    try:
        cells = {"c%d" % n: cell(engine, proc, seconds, n) for n in CLIENTS}
        cells["stream"] = cell(engine, proc, seconds, "stream")
    finally:
        if proc is not None:
            stop(proc)
    os.sched_setaffinity(fakes.pid, cpu_set(None))
    try:
        proc = start_relay(engine, bins, script, None)
        try:
            cells["machine"] = cell(engine, proc, seconds, "stream", cpu=None)
        finally:
            if proc is not None:
                stop(proc)
    finally:
        os.sched_setaffinity(fakes.pid, cpu_set(1))
    return cells


def median(rounds, engine, cell, key):
    values = [r[engine][cell][key] for r in rounds if r[engine][cell].get(key) is not None]
    return statistics.median(values) if values else None


def table(rounds, engines):
    def fmt(value, unit):
        if value is None:
            return "—"
        if unit == "ms":
            return "%.1f ms" % (1000 * value) if value < 1 else "%.2f s" % value
        return "{:,.0f}".format(value) if value >= 100 else "%.2f" % value

    head = "| median of %d rounds | %s |" % (len(rounds), " | ".join(engines))
    lines = [head, "|" + " --- |" * (len(engines) + 1)]
    for clients in CLIENTS:
        cell = "c%d" % clients
        row = []
        for engine in engines:
            rps, p50, p99 = (median(rounds, engine, cell, k) for k in ("rps", "p50", "p99"))
            row.append("%s req/s, p50 %s, p99 %s" % (fmt(rps, ""), fmt(p50, "ms"), fmt(p99, "ms")))
        lines.append("| non-stream chat, %d tokens, %d clients | %s |" % (TOKENS, clients, " | ".join(row)))
    row = []
    for engine in engines:
        cpu, ok = median(rounds, engine, "c256", "cpu"), median(rounds, engine, "c256", "ok")
        row.append("%.2f ms" % (1000 * cpu / ok) if cpu is not None and ok else "—")
    lines.append("| relay CPU per answer, 256 clients | %s |" % " | ".join(row))
    lines.append("| streamed tokens/s relayed, %d clients × %d tokens | %s |" % (
        STREAM_CLIENTS, STREAM_TOKENS, " | ".join(fmt(median(rounds, e, "stream", "tps"), "") for e in engines)))
    lines.append("| same, the relay free on every CPU (the fakes and the load too) | %s |" % " | ".join(
        fmt(median(rounds, e, "machine", "tps"), "") for e in engines))
    if "a3proxy" in engines:
        for cell_name, what in (("stream", "one CPU"), ("machine", "every CPU")):
            ours = median(rounds, "a3proxy", cell_name, "tps")
            lines.append("| streamed tokens/s ÷ this collection's Python proxy's, %s | %s |" % (what, " | ".join(
                "—" if e == "direct" or not ours else "%.1fx" % (median(rounds, e, cell_name, "tps") / ours)
                for e in engines)))
    row = []
    for engine in engines:
        cpu, tokens = median(rounds, engine, "stream", "cpu"), median(rounds, engine, "stream", "tokens")
        row.append("%.3f s" % (1000 * cpu / tokens) if cpu is not None and tokens else "—")
    lines.append("| relay CPU seconds per 1,000 streamed tokens | %s |" % " | ".join(row))
    row = []
    direct = median(rounds, "direct", "c1", "p50") if "direct" in engines else None
    for engine in engines:
        p50 = median(rounds, engine, "c1", "p50")
        row.append("—" if engine == "direct" or direct is None or p50 is None else "%.1f ms" % (1000 * (p50 - 2 * direct)))
    lines.append("| added latency, 1 client, p50 (two backend calls) | %s |" % " | ".join(row))
    errors = sum(r[e][c]["errors"] for r in rounds for e in engines for c in r[e])
    lines.append("")
    lines.append("Wrong or failed answers in all rounds: %d. CPUs: %d%s." % (
        errors, os.cpu_count() or 1, "" if (os.cpu_count() or 1) > 1 else " (relay, fakes and load share it)"))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0, help="per cell (default 4)")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--json", default=os.path.join(WORK, "edge_bench.json"))
    args = parser.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    unknown = set(engines) - set(ENGINES)
    if unknown:
        parser.error("unknown engine(s) %s: choose from %s" % (", ".join(sorted(unknown)), ", ".join(ENGINES)))
    os.makedirs(WORK, exist_ok=True)
    bins = {"stack": venv("venv", pins() + list(STACK_EXTRAS))}
    if {"vllm-router", "edge"} & set(engines):
        bins["router"] = venv("router-venv", [ROUTER_PIN])
    if "edge" in engines:
        render_edge()
    script = upstream_script() if {"upstream", "a3proxy", "edge"} & set(engines) else None
    HARNESS_PYTHON[0] = os.path.join(bins["stack"], "python")  # uvloop: the fakes and the load cost less
    fakes = start([HARNESS_PYTHON[0], FAKES, "serve"] + ["prefill:%d" % p for p in PREFILL_PORTS] +
                  ["decode:%d" % p for p in DECODE_PORTS], 1, "fakes")
    rounds = []
    try:
        time.sleep(0.5)
        for i in range(args.rounds):
            log("round %d of %d" % (i + 1, args.rounds))
            rounds.append({engine: measure(engine, bins, script, args.seconds, fakes) for engine in engines})
    finally:
        stop(fakes)
    result = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count(),
              "seconds_per_cell": args.seconds, "engines": engines, "router": ROUTER_PIN,
              "stack": pins() + list(STACK_EXTRAS), "rounds": rounds}
    with open(args.json, "w") as handle:
        json.dump(result, handle, indent=1)
    print(table(rounds, engines))
    print("\nJSON: %s" % args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
