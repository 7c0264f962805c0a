"""Local, docker-free stand-in for the cluster that playbooks/benchmark.yml drives: etcd, two openYuanrong
workers, two prefill and one decode simulated engines (sim/engine) and vllm-ascend's real proxy, all on
127.60.0.x. `up ARM` (on|off) starts (or restarts the engines of) the stack with the KV pool on or off,
building each engine's --kv-transfer-config with plugins/module_utils/_kv_transfer.py as the vllm role does;
`down` stops what it started (by pid). Prints the proxy URL and the engines' /metrics URLs as JSON.

Needs (read-only) an engine venv with yr.datasystem + dscli + fastapi/httpx/uvicorn ($ENGINE_VENV, default
.cache/engine-venv of the checkout), the unpacked vllm-ascend 0.18.0 sdist ($VLLM_ASCEND_SRC), etcd on PATH, and the
addresses 127.60.0.{11,12,13,15,21} on lo (root: `ip addr add 127.60.0.11/32 dev lo`, ...).
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATE = REPO / ".cache" / "pool_ab_local"
VENV = Path(os.environ.get("ENGINE_VENV", REPO / ".cache" / "engine-venv"))
VAS = Path(os.environ.get("VLLM_ASCEND_SRC", REPO / ".cache" / "vllm-ascend-src"))
P0, P1, D0, PROXY, ETCD = "127.60.0.11", "127.60.0.12", "127.60.0.13", "127.60.0.15", "127.60.0.21"
API, ETCD_PORT, PROXY_PORT = 6700, 23790, 8088
WORKERS = {P0: f"{P0}:18481", P1: f"{P1}:18481", D0: f"{D0}:18481"}
MOONCAKE = {"prefill": {"dp_size": 1, "tp_size": 2}, "decode": {"dp_size": 1, "tp_size": 2}}
PROXY_REL = "examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py"
sys.path.insert(0, str(REPO / "tests" / "sim"))
from simnet import POOL_WORKER_REL, pool_tree_with_yuanrong  # noqa: E402  (the live tests' helpers)


def _kv():
    import importlib.util
    spec = importlib.util.spec_from_file_location("_kv_transfer", REPO / "plugins/module_utils/_kv_transfer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _get(url, timeout=2):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as r:
        return r.status


def _wait(url, what, proc=None, limit=90):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"{what} exited {proc.returncode}")
        try:
            if _get(url) == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"{what} not ready at {url}")


def _env(**extra):
    # no proxies; no VLLM_API_KEY either: the simulated engines honour it as vLLM does, and this stack has no keys
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and k != "VLLM_API_KEY"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _state():
    f = STATE / "pids.json"
    return json.loads(f.read_text()) if f.exists() else {}


def _save(pids):
    (STATE / "pids.json").write_text(json.dumps(pids))


def _spawn(name, argv, env, pids):
    log = open(STATE / f"{name}.log", "ab")
    p = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=STATE, start_new_session=True)
    pids[name] = p.pid
    _save(pids)
    return p


def _kill(name, pids):
    pid = pids.pop(name, None)
    if pid:
        try:
            os.killpg(pid, signal.SIGTERM)  # the processes this script spawned lead their own group
        except ProcessLookupError:
            try:
                os.kill(pid, signal.SIGTERM)  # a dscli worker (daemonised, not a group leader)
            except ProcessLookupError:
                pass
        for _attempt in range(50):
            try:
                os.kill(pid, 0)
                time.sleep(0.1)
            except ProcessLookupError:
                break
    _save(pids)


def _tree():
    root = STATE / "vllm-ascend"
    if not (root / POOL_WORKER_REL).exists():
        pool_tree_with_yuanrong(VAS, root)
    return root


def up(arm):
    STATE.mkdir(parents=True, exist_ok=True)
    pids = _state()
    for d in ("model", "dev", "rpc"):
        (STATE / d).mkdir(exist_ok=True)
    (STATE / "model" / "config.json").write_text(json.dumps(
        {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "max_position_embeddings": 202752}))
    for i in range(4):
        (STATE / "dev" / f"davinci{i}").touch()
    (STATE / "hccn.conf").write_text("address_0=127.31.0.1\nnetmask_0=255.255.255.0\n")
    if "etcd" not in pids:
        _spawn("etcd", ["etcd", "--name", "pool-ab", "--data-dir", str(STATE / "etcd"),
                        "--listen-client-urls", f"http://{ETCD}:{ETCD_PORT}",
                        "--advertise-client-urls", f"http://{ETCD}:{ETCD_PORT}",
                        "--listen-peer-urls", f"http://{ETCD}:{ETCD_PORT + 1}",
                        "--initial-advertise-peer-urls", f"http://{ETCD}:{ETCD_PORT + 1}",
                        "--initial-cluster", f"pool-ab=http://{ETCD}:{ETCD_PORT + 1}"], _env(), pids)
        _wait(f"http://{ETCD}:{ETCD_PORT}/health", "etcd")
    for ip, addr in WORKERS.items():
        key = f"worker-{ip}"
        if key in pids:
            continue
        wd = STATE / key
        wd.mkdir(exist_ok=True)
        r = subprocess.run([str(VENV / "bin" / "dscli"), "start", "-w", "--worker_address", addr, "--etcd_address",
                            f"{ETCD}:{ETCD_PORT}", "--shared_memory_size_mb", "256"], cwd=wd, capture_output=True,
                           text=True, timeout=120, env=_env(), check=False)
        if r.returncode != 0 or "success" not in r.stdout:
            raise SystemExit(r.stdout + r.stderr)
        pids[key] = int(r.stdout.split("PID:")[1].split()[0].strip(" ,)"))
        _save(pids)
    kv = _kv()
    tree = _tree()
    for name in ("prefill-0", "prefill-1", "decode-0"):
        _kill(name, pids)
    procs = {}
    for name, ip, side, port in (("prefill-0", P0, "prefill", 30000), ("prefill-1", P1, "prefill", 30000),
                                 ("decode-0", D0, "decode", 30100)):
        cfg = kv.build(side, port, MOONCAKE, 0, 1, 2, engine_id="0" if side == "prefill" else None,
                       mooncake_extra={"use_ascend_direct": True}, pool_enabled=(arm == "on"))
        env = _env(A3SIM_DEV_DIR=STATE / "dev", A3SIM_HCCN_CONF=STATE / "hccn.conf",
                   VLLM_RPC_BASE_PATH=STATE / "rpc", VLLM_SIM_PYTHON=VENV / "bin" / "python",
                   VLLM_ASCEND_SRC=tree, PYTHONHASHSEED=0, ASCEND_RT_VISIBLE_DEVICES="0,1",
                   A3SIM_US_PER_OUTPUT_TOKEN=2000, HCCL_IF_IP=ip, HCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo",
                   TP_SOCKET_IFNAME="lo", DS_WORKER_ADDR=WORKERS[ip], A3SIM_LOCAL_CACHE_BLOCKS=64)
        procs[name] = _spawn(name, [str(REPO / "sim/engine/bin/vllm"), "serve", str(STATE / "model"), "--host", ip,
                                    "--port", str(API), "--tensor-parallel-size", "2", "--served-model-name",
                                    "glm-5.1", "--max-model-len", "202752", "--trust-remote-code",
                                    "--kv-transfer-config", kv.to_json(cfg)], env, pids)
    for name, ip in (("prefill-0", P0), ("prefill-1", P1), ("decode-0", D0)):
        _wait(f"http://{ip}:{API}/health", name, procs[name])
    if "proxy" not in pids:
        p = _spawn("proxy", [str(VENV / "bin" / "python"), str(VAS / PROXY_REL), "--host", PROXY, "--port",
                             str(PROXY_PORT), "--prefiller-hosts", P0, P1, "--prefiller-ports", str(API), str(API),
                             "--decoder-hosts", D0, "--decoder-ports", str(API)], _env(), pids)
        _wait(f"http://{PROXY}:{PROXY_PORT}/healthcheck", "proxy", p)
    print(json.dumps({"proxy": f"http://{PROXY}:{PROXY_PORT}",
                      "metrics": [f"http://{ip}:{API}/metrics" for ip in (P0, P1, D0)]}))


def down():
    pids = _state()
    for name in ("proxy", "prefill-0", "prefill-1", "decode-0"):
        _kill(name, pids)
    for name in [n for n in pids if n.startswith("worker-")]:
        _kill(name, pids)
    _kill("etcd", pids)


if __name__ == "__main__":
    if sys.argv[1:2] == ["up"]:
        up(sys.argv[2] if len(sys.argv) > 2 else "on")
    elif sys.argv[1:2] == ["down"]:
        down()
    else:
        raise SystemExit(__doc__)
