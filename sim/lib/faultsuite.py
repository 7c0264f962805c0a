#!/usr/bin/env python3
"""Faults under load on the simulated A3 cluster: does the deployment heal by itself, and what do
clients see meanwhile? (Python 3.11 standard library; uses loadgen.py beside it.)

For each fault in turn: wait until the cluster is healthy, start a bounded load through the proxy
(a few clients, sim/lib/loadgen.py), inject the fault, and wait, without running Ansible or anything
else, until the cluster is healthy again with the faulty part replaced (a new process, a restarted
container) and a good answer came through the proxy after that. Then stop the load and summarise:
requests sent, good answers, honest errors, empty 200s, connection errors, timeouts, seconds to
the first good answer after the fault, seconds until healthy again, manual steps (always 0: the
suite never repairs anything; a fault that does not heal within its bound is reported as such).

Used by molecule/selfheal (asserts on every row) and benchmarks/selfheal_bench.py (prints the table).
Nodes and addresses are those of docs/SIM-CONTRACT.md. Traffic goes to 127.30.0.0/24 only.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loadgen  # noqa: E402  (the modules beside this one)
import partition  # noqa: E402
from partition import NODE_IPS, NODE_PREFIX  # noqa: E402  (the nodes' names and addresses, written once)

PREFILL, DECODE = ("p0", "p1"), ("d0", "d1")
API_PORT, WORKER_PORT, ETCD = 6700, 18481, "127.30.0.11:2379"
PROXY = "http://127.30.0.11:8088"
MODEL = "glm-5.1"
CONTAINER, PROXY_CONTAINER, EDGE_CONTAINER = "yr_glm5", "yr_glm5_proxy", "yr_glm5_edge"   # edge: proxy_engine vllm-router
# The engine processes inside yr_glm5 (`python3 -m vllm_sim serve ...`, started by the `vllm` shim). Anchored
# at the start of the command line, so that the `bash -c` running pgrep/pkill never matches itself.
ENGINE_PATTERN = "^[^ ]*python[0-9.]* -m vllm_sim serve"
CANARY_STATE = "/var/lib/ascend-vllm-pd/supervise/ascend-vllm.service.jsonl.canary"   # the engines' canary's state
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _etcd_base() -> tuple:
    """(base URL, opener) of etcd's JSON gateway: plain HTTP, or with $A3SIM_ETCD_PKI (a directory with ca.crt,
    client-p0.crt and client-p0.key, as the etcd role makes them on the controller) TLS with a client certificate
    (a deployment with etcd_tls: true refuses anything else)."""
    pki = os.environ.get("A3SIM_ETCD_PKI")
    if not pki:
        return "http://%s" % ETCD, _OPENER
    import ssl
    ctx = ssl.create_default_context(cafile=os.path.join(pki, "ca.crt"))
    ctx.load_cert_chain(os.path.join(pki, "client-p0.crt"), os.path.join(pki, "client-p0.key"))
    return "https://%s" % ETCD, urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                            urllib.request.HTTPSHandler(context=ctx))


# ------------------------------------------------------------------------------------ observation

def node_sh(node: str, cmd: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """bash -c CMD inside the simulated node (its own docker engine, systemd, ...)."""
    return subprocess.run(["docker", "exec", NODE_PREFIX + node, "bash", "-c", cmd], capture_output=True, text=True,
                          timeout=timeout, check=False)


def in_container(node: str, cmd: str, container: str = CONTAINER, timeout: float = 60) -> subprocess.CompletedProcess:
    return node_sh(node, "docker exec %s bash -c %s" % (container, _q(cmd)), timeout=timeout)


def _q(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def http_status(url: str, timeout: float = 3, body: dict | None = None) -> int:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return 0


def registered_workers() -> list:
    """Worker addresses registered in etcd (/datasystem/cluster/<ip:port>) whose state is ready (value
    "<ts>;ready[;hostId]"), through etcd's JSON gateway."""
    body = {"key": base64.b64encode(b"/datasystem/cluster/").decode(),
            "range_end": base64.b64encode(b"/datasystem/cluster0").decode()}
    base, opener = _etcd_base()
    req = urllib.request.Request(base + "/v3/kv/range", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with opener.open(req, timeout=3) as resp:
            kvs = json.loads(resp.read()).get("kvs", [])
    except (OSError, ValueError):
        return []
    return sorted(base64.b64decode(kv["key"]).decode().rsplit("/", 1)[-1] for kv in kvs
                  if base64.b64decode(kv.get("value", "")).decode("utf-8", "replace").split(";")[1:2] == ["ready"])


def health_problems() -> list:
    """What keeps the cluster from being fully healthy right now (empty list = healthy)."""
    problems = []
    for node, ip in NODE_IPS.items():
        if http_status("http://%s:%d/health" % (ip, API_PORT)) != 200:
            problems.append("%s rank /health" % node)
    want = sorted("%s:%d" % (ip, WORKER_PORT) for ip in NODE_IPS.values())
    have = registered_workers()
    if have != want:
        problems.append("workers in etcd: %s" % (", ".join(have) or "none"))
    if http_status(PROXY + "/healthcheck") != 200:
        problems.append("proxy /healthcheck")
    return problems


def canary_state(node: str) -> dict:
    """What the node's engine canary recorded of the engines' current start ({} when it has none): "answered" lists
    the local ranks it saw answer /health, "held" names a peer that holds the DP group."""
    out = node_sh(node, "cat %s" % CANARY_STATE).stdout
    try:
        state = json.loads(out)
    except ValueError:
        return {}
    return state if isinstance(state, dict) else {}


def canary_unseen() -> list:
    """The nodes whose canary has not yet seen their rank serve in its current start (empty list = every one has).
    The canary restarts a frozen rank after vllm_down_grace only once it saw it answer /health; a rank frozen before
    that counts as never served, and waits for the start timeout. A fault that freezes must wait for this."""
    return ["%s's canary has not seen its rank serve since its start" % node for node, ip in NODE_IPS.items()
            if "http://%s:%d" % (ip, API_PORT) not in canary_state(node).get("answered", [])]


def engine_pids(node: str) -> str:
    return in_container(node, "pgrep -f -- %s | sort | tr '\\n' ' '" % _q(ENGINE_PATTERN)).stdout.strip()


def worker_pid(node: str) -> str:
    return in_container(node, "pgrep -f -- -worker_address=%s:%d" % (NODE_IPS[node], WORKER_PORT)).stdout.strip()


def etcd_pid(node: str) -> str:
    return node_sh(node, "pgrep -x etcd").stdout.strip()


def started_at(node: str, container: str) -> str:
    return node_sh(node, "docker inspect -f '{{.State.StartedAt}}' %s" % container).stdout.strip()


def node_started_at(node: str) -> str:
    out = subprocess.run(["docker", "inspect", "-f", "{{.State.StartedAt}}", NODE_PREFIX + node],
                         capture_output=True, text=True, check=False, timeout=30)
    return out.stdout.strip()


# ------------------------------------------------------------------------------------------ faults

@dataclass
class Fault:
    name: str
    inject: Callable[[], None]
    identity: Callable[[], str]      # what the fault replaces: healed = identity changed and all healthy
    bound: float                     # seconds the suite waits for healing
    cleanup: Callable[[], None] = lambda: None


def _kill_engine(node: str) -> None:
    in_container(node, "pkill -KILL -f -- %s" % _q(ENGINE_PATTERN))


def _hang_engine(node: str) -> None:
    fault = {"engine_hang": {"since": time.time(), "ports": [API_PORT]}}
    node_sh(node, "mkdir -p /etc/a3sim && printf '%%s' %s > /etc/a3sim/faults.json" % _q(json.dumps(fault)))


def _clear_faults(node: str) -> None:
    node_sh(node, "rm -f /etc/a3sim/faults.json")


def _kill_worker(node: str) -> None:
    in_container(node, "pkill -KILL -f -- -worker_address=%s:%d" % (NODE_IPS[node], WORKER_PORT))


def _kill_proxy(container: str = PROXY_CONTAINER) -> None:
    node_sh("p0", "kill -KILL $(docker inspect -f '{{.State.Pid}}' %s)" % container)


def _freeze_engine(node: str) -> None:
    """SIGSTOP every engine process of the node: they live on and hold their sockets, but answer nothing (a rank
    stuck in a driver call or in HCCL, a wedged API server). Their lockstep DP group stalls with them."""
    in_container(node, "pkill -STOP -f -- %s" % _q(ENGINE_PATTERN))


def _thaw_engine(node: str) -> None:
    in_container(node, "pkill -CONT -f -- %s" % _q(ENGINE_PATTERN))


class TimedFault:
    """A fault that lasts `seconds`, then ends by itself (a timer thread ends it, so the suite watches the cluster
    meanwhile): a node frozen with docker pause, a node cut off by the network. identity() counts the ends: the
    fault is over once it ended and the cluster is healthy again."""

    def __init__(self, seconds: float, start: Callable[[], None], end: Callable[[], None]):
        self.seconds, self._start, self._end, self.ends, self._timer = seconds, start, end, 0, None

    def inject(self) -> None:
        self._start()
        self._timer = threading.Timer(self.seconds, self.end)
        self._timer.daemon = True
        self._timer.start()

    def end(self) -> None:
        self._end()
        self.ends += 1

    def identity(self) -> str:
        return "ended %d" % self.ends

    def cleanup(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._end()   # a no-op when it ended already


def _docker(verb: str, node: str) -> None:
    subprocess.run(["docker", verb, NODE_PREFIX + node], capture_output=True, check=False, timeout=60)


def _freeze_node(node: str) -> None:
    """docker pause of the whole node: the containers its own docker engine runs first (their cgroups sit beside the
    node's, not inside it, so pausing the node alone leaves its engines running), then the node itself."""
    node_sh(node, "docker ps -q | xargs -r docker pause")
    _docker("pause", node)


def _thaw_node(node: str) -> None:
    _docker("unpause", node)
    node_sh(node, "docker ps -q --filter status=paused | xargs -r docker unpause")


def _restart_node(node: str) -> None:
    subprocess.run(["docker", "restart", "-t", "10", NODE_PREFIX + node], capture_output=True, check=False, timeout=120)


def faults(restart_node: str = "d1") -> list:
    """The suite, in order. Bounds: 60 s for a crashed rank (the issue's target on this cluster, whose
    engines start in seconds), more where the fault needs a detector (a hang) or a boot."""
    return [
        Fault("kill -9 a decode rank (d1)", lambda: _kill_engine("d1"), lambda: engine_pids("d1"), 60),
        Fault("kill -9 a prefill rank (p1)", lambda: _kill_engine("p1"), lambda: engine_pids("p1"), 60),
        Fault("hang a decode rank (d1: /health 200, no token)", lambda: _hang_engine("d1"), lambda: engine_pids("d1"),
              120, cleanup=lambda: _clear_faults("d1")),
        Fault("kill -9 a datasystem worker (p1)", lambda: _kill_worker("p1"), lambda: worker_pid("p1"), 90),
        Fault("kill -9 etcd (p0)", lambda: node_sh("p0", "pkill -KILL -x etcd"),
              lambda: etcd_pid("p0"), 90),
        Fault("kill -9 the proxy (p0)", _kill_proxy, lambda: started_at("p0", PROXY_CONTAINER), 60),
        Fault("restart node container %s" % restart_node, lambda: _restart_node(restart_node),
              lambda: node_started_at(restart_node) + engine_pids(restart_node), 300),
        Fault("restart container yr_glm5 (p1)", lambda: node_sh("p1", "docker restart -t 5 %s" % CONTAINER),
              lambda: started_at("p1", CONTAINER), 180),
    ] + frozen_faults()


def router_faults() -> list:
    """The suite's faults that test the serving edge of proxy_engine vllm-router (haproxy, the wrapper as the router's
    parent and registrar, the router): a decode rank that dies, hangs or freezes (the registrar must take it out of
    the router), the proxy container (wrapper and router) and the edge container killed, a decode node cut off."""
    return [
        Fault("kill -9 a decode rank (d1)", lambda: _kill_engine("d1"), lambda: engine_pids("d1"), 60),
        Fault("hang a decode rank (d1: /health 200, no token)", lambda: _hang_engine("d1"), lambda: engine_pids("d1"),
              120, cleanup=lambda: _clear_faults("d1")),
        Fault("kill -9 the proxy (p0: the wrapper and its router)", _kill_proxy,
              lambda: started_at("p0", PROXY_CONTAINER), 60),
        Fault("kill -9 the edge (p0: haproxy)", lambda: _kill_proxy(EDGE_CONTAINER),
              lambda: started_at("p0", EDGE_CONTAINER), 60),
        Fault("freeze a decode rank (d1: SIGSTOP, the process lives)", lambda: _freeze_engine("d1"),
              lambda: engine_pids("d1"), 150, cleanup=lambda: _thaw_engine("d1")),
        partition_fault("d1"),
    ]


def assert_row(row: dict, fault: Fault, may_refuse: bool) -> None:
    """What every fault of the suite must show (molecule's selfheal and rolling scenarios): healthy before, healed by
    itself within its bound with a good answer after, no empty 200, no 5xx without an error body, no client waiting
    into its timeout; connections refused only where may_refuse (the listener itself was restarted)."""
    assert not row["precondition"], "the cluster was not healthy before the fault: %s" % row["precondition"]
    assert row["healed"], "%s did not heal within %ss: %s" % (fault.name, fault.bound, row["problems"])
    assert row["empty_200"] == 0, row["details"]
    assert row["bad"] == 0, row["details"]
    assert row["timeout"] == 0, row["details"]
    assert row["good"] > 0 and row["first_good_after"] is not None, row
    assert row["healed_after"] <= fault.bound, row
    if not may_refuse:
        assert row["conn_error"] == 0, row["details"]


def frozen_faults() -> list:
    """Failures that end no process: frozen ranks (restarted by their own node's canary after vllm_down_grace, the
    stalled rest of the group waits), a whole node frozen for 40 s (it thaws by itself) and a node cut off from the
    others for 40 s (the cut heals by itself; the stalled groups resume, or their canaries restart them)."""
    freeze = TimedFault(40, lambda: _freeze_node("d1"), lambda: _thaw_node("d1"))
    return [
        Fault("freeze a decode rank (d1: SIGSTOP, the process lives)", lambda: _freeze_engine("d1"),
              lambda: engine_pids("d1"), 150, cleanup=lambda: _thaw_engine("d1")),
        Fault("freeze a prefill rank (p1: SIGSTOP, the process lives)", lambda: _freeze_engine("p1"),
              lambda: engine_pids("p1"), 150, cleanup=lambda: _thaw_engine("p1")),
        Fault("freeze node d1 for 40 s (docker pause of it and its containers)", freeze.inject, freeze.identity, 150,
              cleanup=freeze.cleanup),
    ] + [partition_fault(node) for node in ("d1", "p1")]


def partition_fault(node: str, seconds: float = 40) -> Fault:
    cut = TimedFault(seconds, lambda: partition.cut(node), lambda: partition.heal(node))   # root
    return Fault("cut node %s off from the others for %g s (then heal)" % (node, seconds), cut.inject, cut.identity,
                 180, cleanup=cut.cleanup)


CLUSTER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cluster.sh")


def lose_node(node: str) -> None:
    """NODE is lost for good, as when it loses power: its link goes first (no FIN or RST reaches anyone), then its
    container is killed. Needs the nodes in namespaces of their own (A3SIM_NET=netns sim/cluster.sh up)."""
    subprocess.run([CLUSTER, "link", node, "down"], capture_output=True, check=True, timeout=60)
    _docker("kill", node)


def holds_address(node: str, address: str) -> bool:
    return (" %s/" % address) in node_sh(node, "ip -o -4 addr show").stdout


def run_node_loss(node: str, base_url: str, address: str, heir: str, clients: int = 3, bound: float = 60,
                  api_key: str | None = None, observe: float = 0, log=print) -> dict:
    """Lose NODE for good under load sent to base_url (the proxies' virtual IP `address`), and watch HEIR take the
    address over. After the move the load runs until 2 more good answers per client arrived (at most `bound` s), 5 s
    more, and at least until `observe` s after the loss: the lost node's engines stay in the other proxy's rotation
    until its probes take them out, and the requests a relay sends them until then fail. Returns loadgen's summary
    plus moved_after (seconds from the loss until HEIR holds the address, None if not within bound), good_after_move
    (good answers whose request started after the move) and last_failure_after (seconds from the loss to the start of
    the last request that got no good answer; None if every one did)."""
    load = loadgen.Load(base_url, MODEL, clients=clients, timeout=30, max_duration=bound + 60, interval=0.2,
                        api_key=api_key)
    load.start()
    moved_after = None
    try:
        if not load.wait_good(count=clients, timeout=60):
            raise AssertionError("no good answers through %s before the loss" % base_url)
        fault_at = time.time()
        log("lose node %s for good at %s" % (node, time.strftime("%H:%M:%S")))
        lose_node(node)
        end = time.monotonic() + bound
        while time.monotonic() < end:
            if holds_address(heir, address):
                moved_after = time.time() - fault_at
                break
            time.sleep(0.2)
        if moved_after is not None:
            mark = time.time()
            load.wait_good(count=1, timeout=max(1.0, end - time.monotonic()))
            load.wait_good(count=2 * clients, timeout=bound)
            time.sleep(max(5.0, fault_at + observe - time.time()))   # and a while of serving after it
    finally:
        outcomes = load.stop(abort=False)
    summary = loadgen.summarize(outcomes, fault_at, name="lose node %s for good" % node)
    failed = [o.start_wall - fault_at for o in outcomes if o.kind != loadgen.GOOD and o.start_wall >= fault_at]
    summary.update(moved_after=moved_after, good_after_move=sum(
        1 for o in outcomes if o.kind == loadgen.GOOD and moved_after is not None and o.start_wall >= mark),
        last_failure_after=max(failed) if failed else None)
    log("%s: %s" % (summary["fault"], json.dumps({k: v for k, v in summary.items() if k != "details"})))
    return summary


def wait_healthy(timeout: float, step: float = 2, problems_now: Callable[[], list] = health_problems) -> list:
    """Wait until problems_now() is empty, at most timeout s; returns what it said last."""
    end = time.monotonic() + timeout
    problems = problems_now()
    while problems and time.monotonic() < end:
        time.sleep(step)
        problems = problems_now()
    return problems


def run_fault(fault: Fault, clients: int = 3, settle: float = 5, log=print, api_key: str | None = None) -> dict:
    """One fault under load. Returns loadgen's summary plus: healed (bool), healed_after (s from the
    fault until healthy with the part replaced and a good answer after that), manual_steps (0),
    problems (what was still wrong at the bound), precondition (problems before the fault)."""
    before = wait_healthy(240) or wait_healthy(60, problems_now=canary_unseen)
    if before:
        return {"fault": fault.name, "precondition": before, "healed": False, "healed_after": None,
                "manual_steps": 0, "sent": 0}
    old = fault.identity()
    load = loadgen.Load(PROXY, MODEL, clients=clients, timeout=30, max_duration=fault.bound + 120, interval=0.2,
                        api_key=api_key)
    load.start()
    try:
        load.wait_good(count=clients, timeout=30)
        fault_at = time.time()
        log("%s: injecting at %s" % (fault.name, time.strftime("%H:%M:%S")))
        fault.inject()
        healed_after, problems = None, []
        end = time.monotonic() + fault.bound
        while time.monotonic() < end:
            time.sleep(1)
            problems = health_problems()
            now_id = fault.identity()
            if problems or not now_id or now_id == old:
                continue
            # healthy with the part replaced: a good answer must come through the proxy after this point
            mark = time.time()
            if load.wait_good(count=1, timeout=max(1.0, end - time.monotonic())):
                healed_after = max(mark, max(o.end_wall for o in load.outcomes if o.kind == loadgen.GOOD)) - fault_at
                break
        if healed_after is None and not problems:
            problems = ["%s was not replaced (still %s)" % (fault.name, old)]
        if healed_after is not None:
            time.sleep(settle)
    finally:
        outcomes = load.stop(abort=False)
        fault.cleanup()
    summary = loadgen.summarize(outcomes, fault_at, name=fault.name)
    summary.update(healed=healed_after is not None, healed_after=healed_after, manual_steps=0,
                   problems=problems if healed_after is None else [], precondition=[])
    log("%s: %s" % (fault.name, json.dumps({k: v for k, v in summary.items() if k != "details"})))
    return summary


COLUMNS = loadgen.TABLE_COLUMNS + (("healed_after", "healthy again after (s)"), ("manual_steps", "manual steps"))


def save_rows(rows: list, path) -> str:
    """Write the rows of a run to path as JSON (its directory made) and return their table (COLUMNS)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(rows, fh, indent=1)
    return loadgen.format_table(rows, COLUMNS)


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", action="append", default=[], help="run the faults whose name contains this")
    p.add_argument("--clients", type=int, default=3)
    p.add_argument("--restart-node", default="d1", choices=sorted(NODE_IPS))
    p.add_argument("--json", default="", help="also write the rows to this file")
    args = p.parse_args(argv)
    rows = [run_fault(f, clients=args.clients, log=lambda m: print(m, file=sys.stderr))
            for f in faults(args.restart_node) if not args.only or any(o in f.name for o in args.only)]
    print(save_rows(rows, args.json) if args.json else loadgen.format_table(rows, COLUMNS))
    return 0 if all(r["healed"] and r.get("empty_200", 0) == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
