"""Tests for the simulated vLLM engine (sim/engine): real processes on loopback.

Every test starts real `vllm` processes (through sim/engine/bin/vllm) bound to
addresses in 127.40.0.0/24, which a session fixture adds to `lo` as /32 (and
removes afterwards). Waits are bounded; timeouts are shortened through the
simulator's env vars.

Optional pieces (tests skip with the reason when missing):
- the vllm-ascend 0.18.0 source tree: $VLLM_ASCEND_SRC, /vllm-workspace/vllm-ascend
  or /tmp/vasdist/vllm_ascend-0.18.0 (proxy script, pool_worker.py);
- fastapi<0.124, httpx, uvicorn in this interpreter (for the real proxy);
- a Python with `yr.datasystem` ($A3SIM_ENGINE_PYTHON, this interpreter or
  /tmp/yrvenv/bin/python), `dscli` next to it or on PATH, and `etcd` on PATH.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from simnet import POOL_WORKER_REL, clean_env, free_port, free_range, loopback_addresses, pool_tree_with_yuanrong

# the one Prometheus text parser of the tests (prometheus_client's), in tests/unit/proxy/wrapper_process.py
HELPERS = str(Path(__file__).resolve().parents[2] / "tests" / "unit" / "proxy")
if HELPERS not in sys.path:
    sys.path.append(HELPERS)
from wrapper_process import parse_metrics  # noqa: E402  pylint: disable=wrong-import-position

REPO = Path(__file__).resolve().parents[2]
ENGINE_HOME = REPO / "sim" / "engine"
SHIM = ENGINE_HOME / "bin" / "vllm"
PROXY_REL = "examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py"

P0, P1, D0, D1, PROXY_IP, SPARE = (f"127.40.0.{i}" for i in (11, 12, 13, 14, 15, 16))
POOL_A, POOL_B = "127.40.0.21", "127.40.0.22"
TEST_IPS = [P0, P1, D0, D1, PROXY_IP, SPARE, POOL_A, POOL_B]
UNCONFIGURED_IP = "127.40.0.99"

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# ----------------------------------------------------------------------------- discovery

def _find_vas_src():
    for cand in (os.environ.get("VLLM_ASCEND_SRC"), "/vllm-workspace/vllm-ascend",
                 "/tmp/vasdist/vllm_ascend-0.18.0"):
        if cand and (Path(cand) / POOL_WORKER_REL).is_file():
            return Path(cand)
    return None


def _has_yr(py):
    try:
        return subprocess.run([py, "-c", "import yr.datasystem"], capture_output=True,
                              timeout=60, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _find_engine_python():
    cands = [os.environ.get("A3SIM_ENGINE_PYTHON"), sys.executable, "/tmp/yrvenv/bin/python"]
    for c in cands:
        if c and Path(c).exists() and _has_yr(c):
            return c, True
    return sys.executable, False


VAS_SRC = _find_vas_src()
ENGINE_PY, ENGINE_HAS_YR = _find_engine_python()


def _find_dscli():
    cand = Path(ENGINE_PY).parent / "dscli"
    if cand.exists():
        return str(cand)
    return os.environ.get("A3SIM_DSCLI") or shutil.which("dscli")


def _proxy_deps_ok():
    try:
        import fastapi  # noqa: F401
        import httpx  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        return False
    return True


need_vas = pytest.mark.skipif(VAS_SRC is None, reason="vllm-ascend 0.18.0 source tree not found "
                              "(set VLLM_ASCEND_SRC or unpack the sdist to /tmp/vasdist)")
need_proxy = pytest.mark.skipif(VAS_SRC is None or not (VAS_SRC / PROXY_REL).is_file() or not _proxy_deps_ok(),
                                reason="real proxy unavailable: needs the vllm-ascend sdist (VLLM_ASCEND_SRC) "
                                       "and fastapi<0.124, httpx, uvicorn in this interpreter")
need_pool = pytest.mark.skipif(
    not ENGINE_HAS_YR or not _find_dscli() or not shutil.which("etcd") or VAS_SRC is None,
    reason="pool test needs a Python with yr.datasystem (A3SIM_ENGINE_PYTHON or /tmp/yrvenv), dscli, "
           "etcd on PATH and the vllm-ascend source tree")


# ----------------------------------------------------------------------------- helpers

def http(method, url, body=None, timeout=10, headers=None):
    data = None
    hdrs = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["content-type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with _opener.open(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def mooncake_cfg(role, kv_port, ptp=2, pdp=1, dtp=2, ddp=1, store=None, engine_id=None, policy=None):
    conns = [{"kv_connector": "MooncakeConnectorV1", "kv_role": role, "kv_port": str(kv_port),
              "kv_connector_module_path": "vllm_ascend.distributed.mooncake_connector",
              "kv_connector_extra_config": {"use_ascend_direct": True,
                                            "prefill": {"dp_size": pdp, "tp_size": ptp},
                                            "decode": {"dp_size": ddp, "tp_size": dtp}}}]
    if store:
        conns.append({"kv_connector": "AscendStoreConnector", "kv_role": role,
                      "kv_connector_extra_config": {"lookup_rpc_port": "0", "backend": store}})
    cfg = {"kv_connector": "MultiConnector", "kv_role": role,
           "kv_connector_extra_config": {"connectors": conns}}
    if engine_id is not None:
        cfg["engine_id"] = engine_id
    if policy:
        cfg["kv_load_failure_policy"] = policy
    return json.dumps(cfg)


class Proc:
    def __init__(self, argv, env, cwd, name):
        self.name = name
        self.log = Path(cwd) / f"{name}.out"
        self.errlog = Path(cwd) / f"{name}.err"
        self._out = open(self.log, "wb")
        self._err = open(self.errlog, "wb")
        self.p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=self._out, stderr=self._err,
                                  stdin=subprocess.DEVNULL, start_new_session=True)

    @property
    def pid(self):
        return self.p.pid

    def output(self):
        return self.log.read_text(errors="replace")

    def errors(self):
        return self.errlog.read_text(errors="replace")

    def all_output(self):
        return self.output() + "\n" + self.errors()

    def wait_exit(self, timeout):
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout=10):
        if self.p.poll() is None:
            try:
                os.kill(self.p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.p.pid, signal.SIGKILL)
                self.p.wait(timeout=5)
        self._out.close()
        self._err.close()
        return self.p.returncode


class Engine(Proc):
    def __init__(self, tmp, name, host, port, extra_args=(), env=None, model=None, tp=2):
        self.host, self.port = host, port
        self.base = f"http://{host}:{port}"
        argv = [str(SHIM), "serve", str(model or tmp / "model"), "--host", host, "--port", str(port),
                "--tensor-parallel-size", str(tp), "--served-model-name", "glm-5.1",
                "--max-model-len", "202752", "--trust-remote-code", *extra_args]
        super().__init__(argv, env, tmp, name)

    def wait_ready(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.p.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.p.returncode}:\n{self.all_output()[-4000:]}")
            try:
                status, _unused = http("GET", self.base + "/health", timeout=1)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"{self.name} not ready within {timeout}s:\n{self.all_output()[-4000:]}")

    def metrics(self):
        status, body = http("GET", self.base + "/metrics")
        assert status == 200
        return parse_metrics(body.decode())

    def metric(self, name):
        return sum(v for k, v in self.metrics().items() if k.split("{")[0] == name)


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def hosts():
    """Add the test node IPs to lo as /32 (like sim/up does); remove them afterwards."""
    yield from loopback_addresses(TEST_IPS)


@pytest.fixture
def sim(tmp_path, hosts):
    """A simulated node file system (model, /dev/davinci*, hccn.conf) plus process tracking."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(
        {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
         "max_position_embeddings": 202752}))
    dev = tmp_path / "dev"
    dev.mkdir()
    for i in range(16):
        (dev / f"davinci{i}").touch()
    (tmp_path / "hccn.conf").write_text("address_0=127.31.0.1\nnetmask_0=255.255.255.0\n")
    (tmp_path / "rpc").mkdir()

    class Sim:
        path = tmp_path
        procs = []

        def env(self, ip=None, **extra):
            base = dict(A3SIM_DEV_DIR=dev, A3SIM_HCCN_CONF=tmp_path / "hccn.conf",
                        VLLM_RPC_BASE_PATH=tmp_path / "rpc", VLLM_SIM_PYTHON=ENGINE_PY,
                        VLLM_ASCEND_SRC=VAS_SRC or tmp_path / "no-vllm-ascend",
                        PYTHONHASHSEED=0, ASCEND_RT_VISIBLE_DEVICES="0,1", A3SIM_DP_TIMEOUT_S=15,
                        A3SIM_US_PER_OUTPUT_TOKEN=200, A3SIM_DS_CONNECT_TIMEOUT_MS=5000)
            if ip:
                base.update(HCCL_IF_IP=ip, HCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo",
                            TP_SOCKET_IFNAME="lo")
            base.update(extra)
            return clean_env(**base)

        def engine(self, name, host, port=None, args=(), env=None, **kw):
            e = Engine(tmp_path, name, host, port or free_port(host), args, env or self.env(host), **kw)
            self.procs.append(e)
            return e

        def proc(self, argv, env, name, cwd=None):
            p = Proc(argv, env, cwd or tmp_path, name)
            self.procs.append(p)
            return p

        def patched_tree(self):
            """A copy of the relevant vllm-ascend files with a yuanrong backend registered (as the patch does)."""
            return pool_tree_with_yuanrong(VAS_SRC, tmp_path / "vllm-ascend-patched")

        def yr_stub(self):
            """A stand-in yr.datasystem package (import works, no SDK needed)."""
            root = tmp_path / "yrstub"
            (root / "yr" / "datasystem").mkdir(parents=True, exist_ok=True)
            (root / "yr" / "__init__.py").write_text("")
            (root / "yr" / "datasystem" / "__init__.py").write_text(
                "class KVClient:\n    def __init__(self, *a, **k):\n        pass\n"
                "    def init(self):\n        raise RuntimeError('code: [RPC unavailable], msg: [stub]')\n")
            return root

    s = Sim()
    yield s
    for p in reversed(s.procs):
        p.stop()


def run_engine_once(sim, host, args, env, timeout=30, tp=2, model=None):
    e = sim.engine("once", host, args=args, env=env, tp=tp, model=model)
    rc = e.wait_exit(timeout)
    assert rc is not None, f"engine did not exit within {timeout}s:\n{e.all_output()[-3000:]}"
    return rc, e.output(), e.errors()


# ----------------------------------------------------------------------------- argument handling

def _shim(args, env=None, timeout=30):
    return subprocess.run([str(SHIM), *args], capture_output=True, text=True, timeout=timeout,
                          env=env or clean_env(VLLM_SIM_PYTHON=ENGINE_PY), check=False)


def test_version_and_no_subcommand():
    r = _shim(["--version"])
    assert r.returncode == 0 and r.stdout.strip() == "0.18.0"
    r = _shim([])
    assert r.returncode == 2 and "usage:" in r.stderr


def test_rejects_unknown_flag():
    r = _shim(["serve", "/data/GLM-5.1-w8a8", "--port", "6700", "--bogus-flag", "1"])
    assert r.returncode == 2
    assert "usage: vllm" in r.stderr
    assert "unrecognized arguments: --bogus-flag" in r.stderr


@pytest.mark.parametrize("flag", ["--kv-transfer-config", "--additional-config", "--speculative-config",
                                  "--compilation-config"])
def test_rejects_malformed_json(flag):
    r = _shim(["serve", "/data/GLM-5.1-w8a8", flag, '{"num_speculative_tokens": 3, "method":}'])
    assert r.returncode == 2, r.stderr
    assert "usage: vllm serve" in r.stderr
    assert re.search(rf"argument {flag}(/-O)?: invalid JSON for {flag}", r.stderr), r.stderr


def test_rejects_invalid_kv_role_and_bad_int():
    r = _shim(["serve", "/m", "--kv-transfer-config", '{"kv_connector": "MultiConnector", "kv_role": "kv_prod"}'])
    assert r.returncode == 2 and "Unsupported kv_role: kv_prod" in r.stderr
    r = _shim(["serve", "/m", "--data-parallel-rank", "zero"])
    assert r.returncode == 2 and "argument --data-parallel-rank/-dpn: invalid int value" in r.stderr


SEED_PREFILL_KV = (
    '{ "kv_connector": "MultiConnector", "kv_role": "kv_producer", "engine_id": "0", '
    '"kv_connector_extra_config": { "connectors": [ { "kv_connector": "MooncakeConnectorV1", '
    '"kv_role": "kv_producer", "kv_port": "30000", "kv_connector_module_path": '
    '"vllm_ascend.distributed.mooncake_connector", "kv_connector_extra_config": { "use_ascend_direct": true, '
    '"prefill": { "dp_size": 2, "tp_size": 16 }, "decode": { "dp_size": 2, "tp_size": 16 } } }, '
    '{ "kv_connector": "AscendStoreConnector", "kv_role": "kv_producer", "kv_connector_extra_config": '
    '{ "lookup_rpc_port": "0", "backend": "yuanrong" } } ] } }')


def seed_args(role, port, rank, dp_addr, rpc_port):
    common = ["--host", "127.0.0.1", "--port", str(port), "--data-parallel-size", "2",
              "--data-parallel-rank", str(rank), "--data-parallel-address", dp_addr,
              "--data-parallel-rpc-port", str(rpc_port), "--tensor-parallel-size", "16",
              "--enable-expert-parallel", "--speculative-config",
              '{"num_speculative_tokens": 3, "method":"deepseek_mtp"}', "--seed", "1024",
              "--served-model-name", "glm-5.1", "--max-model-len", "202752"]
    addl = ["--additional-config", '{"enable_npugraph_ex": true, "fuse_muls_add":true,'
            '"multistream_overlap_shared_expert":true,"recompute_scheduler_enable" : true}']
    tail = ["--enable-auto-tool-choice", "--tool-call-parser", "glm47", "--reasoning-parser", "glm45"]
    if role == "prefill":
        return common + addl + ["--max-num-batched-tokens", "4096", "--trust-remote-code", "--max-num-seqs",
                                "64", "--quantization", "ascend", "--gpu-memory-utilization", "0.95",
                                "--enforce-eager"] + tail + ["--kv-transfer-config", SEED_PREFILL_KV]
    decode_kv = SEED_PREFILL_KV.replace("kv_producer", "kv_consumer").replace('"engine_id": "0", ', "") \
        .replace('"30000"', '"30100"').replace('"lookup_rpc_port": "0"', f'"lookup_rpc_port": "{rank}"')
    return common + ["--max-num-batched-tokens", "32", "--compilation-config",
                     '{"cudagraph_mode":"FULL_DECODE_ONLY", "cudagraph_capture_sizes":[4, 8, 12, 16, 20, 24, 28, 32]}'] \
        + addl + ["--trust-remote-code", "--max-num-seqs", "8", "--gpu-memory-utilization", "0.92",
                  "--async-scheduling", "--quantization", "ascend"] + tail + ["--kv-transfer-config", decode_kv]


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_seed_command_lines_parse_then_model_missing_fails(tmp_path, role):
    """The seed's exact flags are accepted (no exit 2); a missing model fails like vLLM."""
    missing = tmp_path / "GLM-5.1-w8a8"
    args = ["serve", str(missing)] + seed_args(role, free_port(), 1, "127.0.0.1", free_port())
    r = _shim(args)
    assert r.returncode == 1, r.stderr
    assert f"Invalid repository ID or local directory specified: '{missing}'" in r.stderr
    assert "ensure the presence of a 'config.json'" in r.stderr
    assert "non-default args" in r.stdout and "'tensor_parallel_size': 16" in r.stdout


# ----------------------------------------------------------------------------- startup failures

def test_model_dir_without_config_json(sim):
    empty = sim.path / "empty-model"
    empty.mkdir()
    rc, out, err = run_engine_once(sim, P0, [], sim.env(P0), model=empty)
    assert rc == 1
    assert f"Invalid repository ID or local directory specified: '{empty}'" in err
    assert "ERROR" in out


def test_visible_device_absent(sim):
    (sim.path / "dev" / "davinci1").unlink()
    rc, out, err = run_engine_once(sim, P0, [], sim.env(P0, ASCEND_RT_VISIBLE_DEVICES="0,1"))
    assert rc == 1
    assert "invalid device=1, input visible devices:0,1" in err
    assert "error code is 107001" in err


def test_fewer_visible_devices_than_tp(sim):
    rc, out, err = run_engine_once(sim, P0, [], sim.env(P0, ASCEND_RT_VISIBLE_DEVICES="0,1"), tp=4)
    assert rc == 1
    assert "World size (4) is larger than the number of available NPUs (2)" in err


def test_kv_config_dp_tp_disagree_with_own_flags(sim):
    kv = mooncake_cfg("kv_producer", free_range(P0, 2), ptp=4, dtp=4)
    rc, out, err = run_engine_once(sim, P0, ["--kv-transfer-config", kv], sim.env(P0))
    assert rc == 1
    assert ("ValueError: KV transfer 'prefill' config has a conflicting tensor parallel size. "
            "Expected 2, but got 4.") in err
    kv = mooncake_cfg("kv_consumer", free_range(P0, 2), ddp=2)
    rc, out, err = run_engine_once(sim, P0, ["--kv-transfer-config", kv], sim.env(P0))
    assert rc == 1
    assert "KV transfer 'decode' config has a conflicting data parallel size. Expected 1, but got 2." in err


def test_kv_config_prefill_tp_smaller_than_decode_tp(sim):
    kv = mooncake_cfg("kv_producer", free_range(P0, 2), ptp=2, dtp=4)
    rc, out, err = run_engine_once(sim, P0, ["--kv-transfer-config", kv], sim.env(P0))
    assert rc == 1
    assert "ValueError: prefill_tp_size: 2 must be greater than or equal to the decode_tp_size: 4" in err


@need_vas
def test_yuanrong_backend_without_patch_is_bare_assertion(sim):
    import ast
    kv = mooncake_cfg("kv_producer", free_range(P0, 2), store="yuanrong")
    rc, out, err = run_engine_once(sim, P0, ["--kv-transfer-config", kv], sim.env(P0, VLLM_ASCEND_SRC=VAS_SRC))
    assert rc == 1
    lines = err.strip().splitlines()
    assert lines[-1] == "AssertionError", err
    assert "assert backend is not None" in err
    pw = VAS_SRC / POOL_WORKER_REL
    tree = ast.parse(pw.read_text())
    line = next(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assert)
                and "backend is not None" in ast.unparse(n))
    assert f'File "{pw}", line {line}, in __init__' in err
    assert "EngineCore failed to start." in out


@need_vas
def test_patched_tree_needs_ds_worker_addr(sim):
    kv = mooncake_cfg("kv_producer", free_range(P0, 2), store="yuanrong")
    env = sim.env(P0, VLLM_ASCEND_SRC=sim.patched_tree(), PYTHONPATH=sim.yr_stub())
    rc, out, err = run_engine_once(sim, P0, ["--kv-transfer-config", kv], env)
    assert rc == 1
    assert ("ValueError: Environment variable DS_WORKER_ADDR is required, expected format "
            "'<host>:<port>'.") in err


@need_vas
def test_patched_tree_ds_worker_not_answering(sim):
    kv = mooncake_cfg("kv_producer", free_range(P0, 2), store="yuanrong")
    addr = f"{SPARE}:{free_port(SPARE)}"
    env = sim.env(P0, VLLM_ASCEND_SRC=sim.patched_tree(), PYTHONPATH=sim.yr_stub(), DS_WORKER_ADDR=addr)
    rc, out, err = run_engine_once(sim, P0, ["--kv-transfer-config", kv], env)
    assert rc == 1
    assert "RuntimeError: code: [RPC unavailable]" in err and addr in err


@pytest.mark.parametrize("case", ["gloo_missing", "hccl_missing", "ip_not_on_lo", "gloo_ip_not_on_lo"])
def test_nic_checks(sim, case):
    env = {
        "gloo_missing": sim.env(P0, GLOO_SOCKET_IFNAME="nosuch0"),
        "hccl_missing": sim.env(P0, HCCL_SOCKET_IFNAME="nosuch0", GLOO_SOCKET_IFNAME=None),
        "ip_not_on_lo": sim.env(P0, HCCL_IF_IP=UNCONFIGURED_IP, GLOO_SOCKET_IFNAME=None),
        "gloo_ip_not_on_lo": sim.env(P0, HCCL_IF_IP=UNCONFIGURED_IP),
    }[case]
    rc, out, err = run_engine_once(sim, P0, [], env)
    assert rc == 1
    expect = {
        "gloo_missing": "Unable to find interface for: [nosuch0]",
        "hccl_missing": "HCCL_SOCKET_IFNAME=nosuch0 matches no interface",
        "ip_not_on_lo": f"HCCL_IF_IP[{UNCONFIGURED_IP}] is not configured on HCCL_SOCKET_IFNAME[lo]",
        "gloo_ip_not_on_lo": f"Gloo interface [lo] does not carry HCCL_IF_IP {UNCONFIGURED_IP}",
    }[case]
    assert expect in err


def test_nic_rule_accepts_127_0_0_1_and_listed_address(sim):
    for ip in ("127.0.0.1", P0):
        e = sim.engine(f"nic-{ip}", P0, env=sim.env(ip))
        e.wait_ready()
        assert e.stop() == 0


def test_mooncake_port_in_use(sim):
    base = free_range(P0, 2)
    blocker = socket.socket()
    blocker.bind((P0, base + 1))
    blocker.listen(1)
    try:
        rc, out, err = run_engine_once(sim, P0, ["--kv-transfer-config", mooncake_cfg("kv_producer", base)],
                                       sim.env(P0))
    finally:
        blocker.close()
    assert rc == 1
    assert f"zmq.error.ZMQError: Address already in use (addr='tcp://{P0}:{base + 1}')" in err


def test_api_port_in_use(sim):
    port = free_port(P0)
    blocker = socket.socket()
    blocker.bind((P0, port))
    blocker.listen(1)
    try:
        e = sim.engine("busy", P0, port=port)
        rc = e.wait_exit(20)
    finally:
        blocker.close()
    assert rc == 1 and "[Errno 98] Address already in use" in e.errors()


# ----------------------------------------------------------------------------- DP group

def _dp_args(rank, addr, rpc, kv_base=None):
    args = ["--data-parallel-size", "2", "--data-parallel-rank", str(rank), "--data-parallel-address", addr,
            "--data-parallel-rpc-port", str(rpc)]
    if kv_base is not None:
        args += ["--kv-transfer-config", mooncake_cfg("kv_producer", kv_base, pdp=2, ddp=2)]
    return args


def test_dp_group_of_two_forms_then_breaks_when_a_rank_dies(sim):
    rpc = free_port(P0)
    kv_base = free_range(P0, 4)
    r0 = sim.engine("dp0", P0, args=_dp_args(0, P0, rpc, kv_base))
    time.sleep(1.0)
    # rank 0 alone: its API must not answer yet (the socket may accept, nothing responds)
    with pytest.raises(OSError):
        http("GET", r0.base + "/health", timeout=1)
    assert r0.p.poll() is None
    r1 = sim.engine("dp1", P1, args=_dp_args(1, P0, rpc, kv_base))
    r0.wait_ready()
    r1.wait_ready()
    assert "DP group formed: 2/2 ranks" in r0.output()
    assert "DP group formed: rank 1/2" in r1.output()
    # rank 1 binds kv ports kv_port + 1*tp .. +tp-1 on its own IP
    assert f"Mooncake handshake ports {kv_base + 2}-{kv_base + 3} bound on {P1}" in r1.output()
    status, body = http("POST", r1.base + "/v1/completions", {"model": "glm-5.1", "prompt": "hi", "max_tokens": 4})
    assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 4
    assert r1.stop() == 0
    assert r0.wait_exit(10) == 1, "rank 0 must go down with its group"
    assert "DP group member rank 1 disconnected" in r0.output()


def _dp_pair(sim, **env):
    rpc = free_port(P0)
    r0 = sim.engine("dp0", P0, args=_dp_args(0, P0, rpc), env=sim.env(P0, **env))
    r1 = sim.engine("dp1", P1, args=_dp_args(1, P0, rpc), env=sim.env(P1, **env))
    r0.wait_ready()
    r1.wait_ready()
    return r0, r1


def _complete(rank, timeout=10, tokens=4):
    return http("POST", rank.base + "/v1/completions", {"model": "glm-5.1", "prompt": "hi", "max_tokens": tokens},
                timeout=timeout)


def test_dp_group_steps_in_lockstep_a_frozen_member_stalls_the_other_until_it_thaws(sim):
    r0, r1 = _dp_pair(sim)
    assert _complete(r0)[0] == 200
    os.kill(r1.p.pid, signal.SIGSTOP)
    try:
        time.sleep(1.5)   # longer than the stall threshold (1 s): the group has stopped stepping
        # rank 0's API server still answers /health, as a real rank blocked in a collective does ...
        assert http("GET", r0.base + "/health", timeout=3)[0] == 200
        # ... but its requests make no progress
        with pytest.raises(OSError):
            _complete(r0, timeout=2)
        result = {}
        waiter = threading.Thread(target=lambda: result.update(answer=_complete(r0, timeout=20)))
        waiter.start()
        time.sleep(1.0)
        assert waiter.is_alive(), "a request went through a group whose member is frozen"
    finally:
        os.kill(r1.p.pid, signal.SIGCONT)
    waiter.join(20)
    # thawed within the execution timeout (1800 s by default): the waiting request finishes, nobody died
    assert result["answer"][0] == 200 and json.loads(result["answer"][1])["usage"]["completion_tokens"] == 4
    assert r0.p.poll() is None and r1.p.poll() is None
    assert _complete(r1)[0] == 200


def test_dp_group_stalled_past_the_execution_timeout_fails_with_hccl_text(sim):
    r0, r1 = _dp_pair(sim, HCCL_EXEC_TIMEOUT=3)
    os.kill(r1.p.pid, signal.SIGSTOP)
    try:
        time.sleep(1.2)
        t0 = time.monotonic()
        status, body = _complete(r0, timeout=30)
        waited = time.monotonic() - t0
        # the engine died under the request: vLLM's empty 500 for an EngineDeadError, after HCCL's timeout, not before
        assert status == 500 and body == b""
        assert 2.5 <= waited < 10, waited
        assert r0.wait_exit(10) == 1
        text = r0.all_output()
        assert "Watchdog caught collective operation timeout: WorkHCCL(" in text and "Timeout(ms)=3000" in text
        # rank 0 knows which member it waits for; the advice names HCCL's variable
        assert "has not received the Notify record from remote rank: [1]" in text
        assert "EI0002" in text and "HCCL_EXEC_TIMEOUT" in text
        assert "AclrtSynchronizeDeviceWithTimeout, error code is 507048" in r0.output()
    finally:
        os.kill(r1.p.pid, signal.SIGCONT)
    # the member finds its master gone when it thaws and ends with the group
    assert r1.wait_exit(10) == 1
    assert "DP group member rank 0 disconnected" in r1.output()


def test_an_idle_group_with_a_frozen_member_times_out_only_once_work_waits(sim):
    r0, r1 = _dp_pair(sim, A3SIM_HCCL_EXEC_TIMEOUT_S=2, HCCL_EXEC_TIMEOUT=600)
    os.kill(r1.p.pid, signal.SIGSTOP)
    try:
        time.sleep(3.5)   # past the timeout, but nothing waited on the group: nobody fails
        assert r0.p.poll() is None and http("GET", r0.base + "/health", timeout=3)[0] == 200
        t0 = time.monotonic()
        assert _complete(r0, timeout=30)[0] == 500
        assert time.monotonic() - t0 >= 1.8   # the simulator's variable wins over HCCL's
        assert r0.wait_exit(10) == 1
    finally:
        os.kill(r1.p.pid, signal.SIGCONT)


def test_dp_rank1_times_out_without_master(sim):
    rpc = free_port(P0)
    env = sim.env(P1, A3SIM_DP_TIMEOUT_S=2)
    t0 = time.monotonic()
    rc, out, err = run_engine_once(sim, P1, _dp_args(1, P0, rpc), env)
    assert rc == 1 and time.monotonic() - t0 < 15
    assert "RuntimeError: Did not receive response from front-end process within" in err
    assert f"while trying to connect to ({P0}, {rpc})" in err


def test_dp_rank0_times_out_without_members(sim):
    rpc = free_port(P0)
    rc, out, err = run_engine_once(sim, P0, _dp_args(0, P0, rpc), sim.env(P0, A3SIM_DP_TIMEOUT_S=2))
    assert rc == 1
    assert "TimeoutError: Timed out waiting for engines to send initial message on input socket." in err
    assert "1/2 clients joined" in err


def test_dp_rank0_with_foreign_dp_address_fails(sim):
    rc, out, err = run_engine_once(sim, P0, _dp_args(0, UNCONFIGURED_IP, free_port()), sim.env(P0))
    assert rc == 1 and "Cannot assign requested address" in err


# ----------------------------------------------------------------------------- single-instance API

def test_api_contract_models_404_metrics_stream(sim):
    e = sim.engine("api", P0)
    e.wait_ready()
    status, body = http("GET", e.base + "/health")
    assert status == 200 and body == b""
    status, body = http("GET", e.base + "/v1/models")
    assert status == 200 and json.loads(body)["data"][0]["id"] == "glm-5.1"
    status, body = http("POST", e.base + "/v1/chat/completions",
                        {"model": "glm-4", "messages": [{"role": "user", "content": "hi"}]})
    assert status == 404
    assert json.loads(body) == {"error": {"message": "The model `glm-4` does not exist.", "type": "NotFoundError",
                                          "param": "model", "code": 404}}
    status, body = http("POST", e.base + "/v1/chat/completions",
                        {"model": "glm-5.1", "messages": [{"role": "user", "content": "tell me about pandas"}],
                         "max_tokens": 256, "temperature": 0})
    assert status == 200
    resp = json.loads(body)
    text = resp["choices"][0]["message"]["content"]
    assert "pandas" in text and "glm-5.1" in text
    u = resp["usage"]
    assert u["completion_tokens"] > 0 and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    status, body = http("POST", e.base + "/v1/completions", {"prompt": "one two three", "max_tokens": 3})
    resp = json.loads(body)
    assert status == 200 and resp["usage"]["completion_tokens"] == 3 and resp["choices"][0]["finish_reason"] == "length"
    # streaming chat with usage
    status, body = http("POST", e.base + "/v1/chat/completions",
                        {"model": "glm-5.1", "messages": [{"role": "user", "content": "stream please"}],
                         "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 5})
    assert status == 200
    events = [ln[6:] for ln in body.decode().split("\n") if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(x) for x in events[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert content and chunks[-2]["choices"][0]["finish_reason"] == "length"
    m = e.metrics()
    for name in ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                 "vllm:num_requests_running", "vllm:num_requests_waiting",
                 "vllm:time_to_first_token_seconds_count"):
        assert f'{name}{{engine="0",model_name="glm-5.1"}}' in m, name
    assert m['vllm:time_to_first_token_seconds_count{engine="0",model_name="glm-5.1"}'] == 3
    assert "Prefix cache hit rate:" in e.output()
    assert e.stop() == 0


def test_api_key_from_the_environment_guards_v1_only(sim):
    """VLLM_API_KEY (how the vllm role starts the engines: the key is in neither argv nor the log) as vLLM 0.18:
    /v1 needs the bearer key, else 401 {"error":"Unauthorized"}; /health and /metrics stay open."""
    e = sim.engine("key", P0, env=sim.env(P0, VLLM_API_KEY="s3cret-key"))
    e.wait_ready()
    assert http("GET", e.base + "/health") == (200, b"")
    assert http("GET", e.base + "/metrics")[0] == 200
    body = {"model": "glm-5.1", "prompt": "one two", "max_tokens": 1}
    for headers in (None, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret-key"}):
        assert http("POST", e.base + "/v1/completions", body, headers=headers) == (401, b'{"error":"Unauthorized"}')
    assert http("GET", e.base + "/v1/models")[0] == 401
    assert http("GET", e.base + "/v1/nothing-here")[0] == 401          # before routing, as the middleware
    status, answer = http("POST", e.base + "/v1/completions", body, headers={"Authorization": "bearer s3cret-key"})
    assert status == 200 and json.loads(answer)["usage"]["completion_tokens"] == 1
    assert http("GET", e.base + "/v1/models", headers={"Authorization": "Bearer s3cret-key"})[0] == 200
    assert "s3cret-key" not in e.all_output()
    assert e.stop() == 0
    # --api-key wins over the environment (and, as in vLLM, shows in the non-default args line)
    e = sim.engine("key-flag", P0, args=["--api-key", "from-flag"], env=sim.env(P0, VLLM_API_KEY="s3cret-key"))
    e.wait_ready()
    assert http("POST", e.base + "/v1/completions", body, headers={"Authorization": "Bearer s3cret-key"})[0] == 401
    assert http("POST", e.base + "/v1/completions", body, headers={"Authorization": "Bearer from-flag"})[0] == 200
    assert e.stop() == 0


# vLLM 0.18's PrometheusStatLogger (vllm/v1/metrics/loggers.py): name -> type as the text format shows it
# (prometheus_client puts _total on a counter's HELP/TYPE lines too). The alert rules of the role monitoring
# and the gate read these.
VLLM_METRICS = {
    "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
    "vllm:engine_sleep_state": "gauge", "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prefix_cache_queries_total": "counter", "vllm:prefix_cache_hits_total": "counter",
    "vllm:external_prefix_cache_queries_total": "counter", "vllm:external_prefix_cache_hits_total": "counter",
    "vllm:num_preemptions_total": "counter", "vllm:prompt_tokens_total": "counter",
    "vllm:prompt_tokens_by_source_total": "counter", "vllm:prompt_tokens_cached_total": "counter",
    "vllm:generation_tokens_total": "counter", "vllm:request_success_total": "counter",
    "vllm:time_to_first_token_seconds": "histogram", "vllm:inter_token_latency_seconds": "histogram",
    "vllm:request_time_per_output_token_seconds": "histogram", "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram", "vllm:request_inference_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram", "vllm:request_decode_time_seconds": "histogram",
    "process_start_time_seconds": "gauge",
}


def test_metrics_carry_vllm_names_types_and_move_under_load(sim):
    e = sim.engine("metrics", P0, args=["--max-num-seqs", "2"], env=sim.env(P0, A3SIM_US_PER_OUTPUT_TOKEN=20000))
    e.wait_ready()
    status, body = http("GET", e.base + "/metrics")
    text = body.decode()
    types = dict(line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE "))
    assert {k: types.get(k) for k in VLLM_METRICS} == VLLM_METRICS
    for line in text.splitlines():   # every sample belongs to a declared family
        if line and not line.startswith("#"):
            sample = line.split("{")[0].split(" ")[0]
            family = re.sub(r"_(bucket|count|sum)$", "", sample)
            assert sample in types or family in types, line
    before = e.metrics()
    assert before['vllm:request_success_total{engine="0",finished_reason="repetition",model_name="glm-5.1"}'] == 0
    assert before['vllm:engine_sleep_state{engine="0",model_name="glm-5.1",sleep_state="awake"}'] == 1
    # load: four concurrent requests on two slots -> some wait, all run, then everything is counted
    seen = {"running": 0, "waiting": 0}
    results = []

    def one(i):
        results.append(http("POST", e.base + "/v1/completions",
                            {"prompt": " ".join(f"q{i}w{j}" for j in range(200)), "max_tokens": 20}, timeout=60)[0])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        seen["running"] = max(seen["running"], e.metric("vllm:num_requests_running"))
        seen["waiting"] = max(seen["waiting"], e.metric("vllm:num_requests_waiting"))
        time.sleep(0.02)
    for t in threads:
        t.join()
    assert results == [200] * 4
    assert seen["running"] == 2 and seen["waiting"] >= 1, seen
    m = e.metrics()
    lab = '{engine="0",model_name="glm-5.1"}'
    assert m["vllm:num_requests_running" + lab] == 0 and m["vllm:num_requests_waiting" + lab] == 0
    assert m["vllm:generation_tokens_total" + lab] == 80
    prompt = m["vllm:prompt_tokens_total" + lab]
    assert prompt >= 800 and prompt == m["vllm:prefix_cache_queries_total" + lab]
    assert m['vllm:request_success_total{engine="0",finished_reason="length",model_name="glm-5.1"}'] == 4
    assert sum(v for k, v in m.items() if k.startswith("vllm:prompt_tokens_by_source_total")) == prompt
    for hist in ("time_to_first_token_seconds", "e2e_request_latency_seconds", "request_queue_time_seconds",
                 "request_prefill_time_seconds", "request_decode_time_seconds", "request_inference_time_seconds",
                 "request_time_per_output_token_seconds"):
        assert m[f"vllm:{hist}_count" + lab] == 4, hist
    assert m["vllm:inter_token_latency_seconds_count" + lab] == 4 * 19
    # 19 gaps of 20 ms each: all inter-token latencies in the 0.025 bucket, none below 0.01
    assert m['vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="glm-5.1"}'] == 0
    assert m['vllm:inter_token_latency_seconds_bucket{engine="0",le="0.025",model_name="glm-5.1"}'] == 76
    assert m["vllm:request_queue_time_seconds_sum" + lab] > 0.2      # two requests waited for a slot
    assert m["vllm:e2e_request_latency_seconds_sum" + lab] > m["vllm:time_to_first_token_seconds_sum" + lab]
    assert m["vllm:kv_cache_usage_perc" + lab] > before["vllm:kv_cache_usage_perc" + lab]
    assert e.stop() == 0


def test_local_prefix_cache_hits_and_ttft_model(sim):
    env = sim.env(P0, A3SIM_US_PER_TOKEN=2000)
    e = sim.engine("prefix", P0, env=env)
    e.wait_ready()
    prompt = " ".join(f"w{i:03d}" for i in range(300))  # 300 tokens -> 2 full blocks
    t0 = time.monotonic()
    http("POST", e.base + "/v1/completions", {"prompt": prompt, "max_tokens": 1})
    cold = time.monotonic() - t0
    t0 = time.monotonic()
    http("POST", e.base + "/v1/completions", {"prompt": prompt, "max_tokens": 1})
    warm = time.monotonic() - t0
    assert e.metric("vllm:prefix_cache_hits_total") == 256
    assert e.metric("vllm:prefix_cache_queries_total") == 600
    assert cold > 0.5 and warm < cold / 2, (cold, warm)
    assert "Prefix cache hit rate: 42.7%" in e.output()


def test_hccn_conf_missing_gives_garbage(sim):
    good = sim.engine("hccn-ok", P0)
    bad = sim.engine("hccn-missing", P1, env=sim.env(P1, A3SIM_HCCN_CONF=sim.path / "nope" / "hccn.conf"))
    good.wait_ready()
    bad.wait_ready()
    body = {"model": "glm-5.1", "messages": [{"role": "user", "content": "what is the capital of France"}],
            "max_tokens": 64}
    s1, b1 = http("POST", good.base + "/v1/chat/completions", body)
    s2, b2 = http("POST", bad.base + "/v1/chat/completions", body)
    assert s1 == 200 and s2 == 200
    t1 = json.loads(b1)["choices"][0]["message"]["content"]
    t2 = json.loads(b2)["choices"][0]["message"]["content"]
    assert "France" in t1
    assert "France" not in t2 and "glm-5.1" not in t2 and "\ufffd" in t2
    assert json.loads(b2)["usage"]["completion_tokens"] > 0


# ----------------------------------------------------------------------------- engine_hang fault

def write_faults(path, obj):
    """Replace the fault file atomically, as `sim/cluster.sh fault` does (tmp file + rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    os.replace(tmp, path)


def raw_request(host, port, path, body):
    """Send one HTTP/1.1 POST on a plain socket and return the socket (to see every byte, or none)."""
    data = json.dumps(body).encode()
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\ncontent-type: application/json\r\n"
              f"content-length: {len(data)}\r\n\r\n".encode() + data)
    return s


def recv_within(s, timeout):
    """The first bytes the server sends within `timeout` s (b"" = closed), None if it sent nothing."""
    s.settimeout(timeout)
    try:
        return s.recv(65536)
    except socket.timeout:
        return None


HANG_CHAT = {"model": "glm-5.1", "messages": [{"role": "user", "content": "are you there"}], "max_tokens": 4}


def chat_ok(e, timeout=5):
    status, body = http("POST", e.base + "/v1/chat/completions", HANG_CHAT, timeout=timeout)
    return status == 200 and json.loads(body)["usage"]["completion_tokens"] > 0


def test_engine_hang_health_ok_but_completions_never_answer(sim):
    faults = sim.path / "faults.json"
    e = sim.engine("hang", P0, env=sim.env(P0, A3SIM_FAULTS_FILE=faults))
    e.wait_ready()
    assert chat_ok(e)
    write_faults(faults, {"engine_hang": {"since": time.time()}})
    # The API side still answers normally.
    assert http("GET", e.base + "/health", timeout=2) == (200, b"")
    assert http("GET", e.base + "/ping", timeout=2)[0] == 200
    assert http("GET", e.base + "/v1/models", timeout=2)[0] == 200
    assert e.metric("vllm:num_requests_running") == 0
    status, _unused = http("POST", e.base + "/v1/chat/completions", dict(HANG_CHAT, model="glm-4"), timeout=2)
    assert status == 404  # validation happens in the API server, before the engine
    # Completions: accepted, then nothing at all (no status line) until the client gives up.
    t0 = time.monotonic()
    with pytest.raises((TimeoutError, socket.timeout)):
        http("POST", e.base + "/v1/chat/completions", HANG_CHAT, timeout=1.5)
    assert 1.4 < time.monotonic() - t0 < 5
    s1 = raw_request(P0, e.port, "/v1/completions", {"prompt": "one two", "max_tokens": 2})
    s2 = raw_request(P0, e.port, "/v1/chat/completions", dict(HANG_CHAT, stream=True))
    assert recv_within(s1, 1.5) is None and recv_within(s2, 0.2) is None
    # Hung requests count as running (stuck in the engine); a closed client ends its thread.
    assert e.metric("vllm:num_requests_running") == 2
    s1.close()
    deadline = time.monotonic() + 5
    while e.metric("vllm:num_requests_running") != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert e.metric("vllm:num_requests_running") == 1
    # Clearing the fault ends the hang: the waiting stream gets its answer, new requests answer.
    faults.unlink()
    s2.settimeout(5)
    got = b""
    while b"data: [DONE]" not in got:
        chunk = s2.recv(65536)
        if not chunk:
            break
        got += chunk
    s2.close()
    assert got.startswith(b"HTTP/1.1 200 ") and b"data: [DONE]" in got, got[:300]
    assert chat_ok(e)
    assert e.metric("vllm:num_requests_running") == 0
    assert e.stop() == 0


def test_engine_hang_spares_restarted_engines_and_unlisted_ports(sim):
    faults = sim.path / "faults.json"
    env = sim.env(P0, A3SIM_FAULTS_FILE=faults)
    a = sim.engine("hang-a", P0, env=env)
    b = sim.engine("hang-b", P0, env=env)
    a.wait_ready()
    b.wait_ready()
    # Only the listed port hangs.
    write_faults(faults, {"engine_hang": {"since": time.time(), "ports": [a.port]}})
    with pytest.raises((TimeoutError, socket.timeout)):
        http("POST", a.base + "/v1/chat/completions", HANG_CHAT, timeout=1)
    assert chat_ok(b)
    # Without "ports" every engine started before "since" hangs ...
    write_faults(faults, {"engine_hang": {"since": time.time()}})
    with pytest.raises((TimeoutError, socket.timeout)):
        http("POST", b.base + "/v1/chat/completions", HANG_CHAT, timeout=1)
    # ... and a restart cures it: an engine started after "since" answers, on the same port too.
    port_a = a.port
    assert a.stop() == 0
    a2 = sim.engine("hang-a2", P0, port=port_a, env=env)
    a2.wait_ready()
    assert chat_ok(a2)
    with pytest.raises((TimeoutError, socket.timeout)):
        http("POST", b.base + "/v1/chat/completions", HANG_CHAT, timeout=1)
    # A malformed file (or key) means no fault, logged once.
    write_faults(faults, "{not json")
    assert chat_ok(b) and chat_ok(b)
    write_faults(faults, {"engine_hang": {"since": "yesterday"}})
    assert chat_ok(b) and chat_ok(b)
    out = b.output()
    assert out.count("cannot read fault file") == 1, out[-2000:]
    assert out.count("malformed engine_hang") == 1, out[-2000:]


def test_engine_stall_stops_answers_midway_until_cleared(sim):
    """engine_stall: a stream stops after its first token's event, a non-stream answer after half its body; /health
    stays 200; clearing the fault lets both finish (a rank frozen mid-answer, then thawed)."""
    faults = sim.path / "faults.json"
    e = sim.engine("stall", P0, env=sim.env(P0, A3SIM_FAULTS_FILE=faults))
    e.wait_ready()
    write_faults(faults, {"engine_stall": {"since": time.time()}})
    assert http("GET", e.base + "/health", timeout=2) == (200, b"")
    stream = raw_request(P0, e.port, "/v1/chat/completions", dict(HANG_CHAT, stream=True, max_tokens=4))
    whole = raw_request(P0, e.port, "/v1/chat/completions", HANG_CHAT)
    got_stream, got_whole = b"", b""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        for sock, name in ((stream, "s"), (whole, "w")):
            part = recv_within(sock, 0.2)
            if part:
                if name == "s":
                    got_stream += part
                else:
                    got_whole += part
    assert got_stream.startswith(b"HTTP/1.1 200 ") and got_stream.count(b"data: {") == 2, got_stream
    assert b"[DONE]" not in got_stream
    head, _sep, body = got_whole.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head, re.I).group(1))
    assert 0 < len(body) < length, got_whole
    faults.unlink()
    for sock in (stream, whole):
        sock.settimeout(5)
    while b"data: [DONE]" not in got_stream:
        chunk = stream.recv(65536)
        if not chunk:
            break
        got_stream += chunk
    while len(body) < length:
        chunk = whole.recv(65536)
        if not chunk:
            break
        body += chunk
    stream.close()
    whole.close()
    assert b"data: [DONE]" in got_stream
    assert json.loads(body)["usage"]["completion_tokens"] > 0
    assert chat_ok(e)


# ----------------------------------------------------------------------------- PD through the real proxy

def start_proxy(sim, prefills, decodes):
    port = free_port(PROXY_IP)
    argv = [sys.executable, str(VAS_SRC / PROXY_REL), "--host", PROXY_IP, "--port", str(port),
            "--prefiller-hosts", *[e.host for e in prefills], "--prefiller-ports", *[str(e.port) for e in prefills],
            "--decoder-hosts", *[e.host for e in decodes], "--decoder-ports", *[str(e.port) for e in decodes]]
    p = sim.proc(argv, clean_env(), "proxy", cwd=sim.path)
    base = f"http://{PROXY_IP}:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert p.p.poll() is None, p.all_output()
        try:
            if http("GET", base + "/healthcheck", timeout=1)[0] == 200:
                return base
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("proxy not ready:\n" + p.all_output())


def pd_pair(sim, prefill_env=None, decode_env=None, policy=None):
    pre = sim.engine("prefill", P0, args=["--kv-transfer-config",
                                          mooncake_cfg("kv_producer", free_range(P0, 2), engine_id="0")],
                     env=prefill_env or sim.env(P0))
    dec = sim.engine("decode", D0, args=["--kv-transfer-config",
                                         mooncake_cfg("kv_consumer", free_range(D0, 2), policy=policy)],
                     env=decode_env or sim.env(D0))
    pre.wait_ready()
    dec.wait_ready()
    return pre, dec


@need_proxy
def test_pd_pair_through_real_proxy(sim):
    pre, dec = pd_pair(sim)
    proxy = start_proxy(sim, [pre], [dec])
    status, body = http("POST", proxy + "/v1/chat/completions",
                        {"model": "glm-5.1", "messages": [{"role": "user", "content": "你好 explain mooncake kv"}],
                         "stream": False, "temperature": 0, "max_tokens": 256}, timeout=30)
    assert status == 200, body
    resp = json.loads(body)
    text = resp["choices"][0]["message"]["content"]
    assert "mooncake" in text and "glm-5.1" in text
    assert 0 < resp["usage"]["completion_tokens"] <= 256
    # prefill was asked with do_remote_decode and kept the KV; decode pulled it from the prefill's kv port
    assert "Delaying free of" in pre.output()
    m = re.search(r"num_prompt_tokens=(\d+), num_computed_tokens=(\d+) \(local_cache_hit=0, "
                  r"external_cache_hit=(\d+) from mooncake " + re.escape(P0), dec.output())
    assert m and int(m.group(3)) == int(m.group(1)) > 0
    assert "External prefix cache hit rate: 100.0%" in dec.output()
    # streaming through the proxy, with usage
    status, body = http("POST", proxy + "/v1/completions",
                        {"model": "glm-5.1", "prompt": "stream through the proxy", "max_tokens": 7, "stream": True,
                         "stream_options": {"include_usage": True}}, timeout=30)
    assert status == 200
    events = [ln[6:] for ln in body.decode().split("\n") if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(x) for x in events[:-1]]
    assert chunks[-1]["usage"]["completion_tokens"] == 7
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"])


@need_proxy
def test_decode_down_hidden_by_proxy_as_empty_200(sim):
    pre, dec = pd_pair(sim)
    proxy = start_proxy(sim, [pre], [dec])
    assert dec.stop() == 0
    status, body = http("POST", proxy + "/v1/chat/completions",
                        {"model": "glm-5.1", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 16},
                        timeout=30)
    assert status == 200 and body == b"", body  # the hidden failure


@need_proxy
@pytest.mark.parametrize("policy", ["fail", "recompute"])
def test_kv_pull_failure_obeys_policy(sim, policy):
    # the prefill frees un-pulled KV immediately -> every decode pull fails
    pre, dec = pd_pair(sim, prefill_env=sim.env(P0, VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT=0), policy=policy)
    proxy = start_proxy(sim, [pre], [dec])
    req = {"model": "glm-5.1", "messages": [{"role": "user", "content": "policy check"}], "max_tokens": 8}
    time.sleep(0.1)
    status, body = http("POST", proxy + "/v1/chat/completions", req, timeout=30)
    assert status == 200
    assert "Failed to transfer KV cache for request" in dec.output()
    if policy == "fail":
        assert body == b"", body  # decode answered 500, the proxy hides it
        s2, b2 = http("POST", dec.base + "/v1/chat/completions",
                      dict(req, kv_transfer_params={"do_remote_prefill": True, "remote_host": P0,
                                                    "remote_port": 1, "remote_request_id": "x"}))
        assert s2 == 500 and json.loads(b2)["error"]["type"] == "InternalServerError"
    else:
        assert "policy check" in json.loads(body)["choices"][0]["message"]["content"]


# ----------------------------------------------------------------------------- KV pool (openYuanrong)

@pytest.fixture(scope="module")
def yr_pool(tmp_path_factory, hosts):
    if not (ENGINE_HAS_YR and _find_dscli() and shutil.which("etcd") and VAS_SRC is not None):
        pytest.skip("pool test needs yr.datasystem, dscli, etcd and the vllm-ascend tree")
    tmp = tmp_path_factory.mktemp("yrpool")
    dscli = _find_dscli()
    cport, pport = free_port(POOL_A), free_port(POOL_A)
    etcd = subprocess.Popen(
        ["etcd", "--name", "a3sim-test", "--data-dir", str(tmp / "etcd"),
         "--listen-client-urls", f"http://{POOL_A}:{cport}", "--advertise-client-urls", f"http://{POOL_A}:{cport}",
         "--listen-peer-urls", f"http://{POOL_A}:{pport}", "--initial-advertise-peer-urls",
         f"http://{POOL_A}:{pport}", "--initial-cluster", f"a3sim-test=http://{POOL_A}:{pport}"],
        stdout=open(tmp / "etcd.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True,
        env=clean_env())
    workers = []
    pids = {}
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if http("GET", f"http://{POOL_A}:{cport}/health", timeout=1)[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("etcd did not become healthy")

        def start_worker(ip):
            addr = f"{ip}:{free_port(ip)}"
            wd = tmp / f"worker-{addr.replace(':', '_')}"
            wd.mkdir()
            r = subprocess.run([dscli, "start", "-w", "--worker_address", addr, "--etcd_address",
                                f"{POOL_A}:{cport}", "--shared_memory_size_mb", "64"],
                               cwd=wd, capture_output=True, text=True, timeout=120, env=clean_env(), check=False)
            assert r.returncode == 0 and "success" in r.stdout, r.stdout + r.stderr
            workers.append(addr)
            pids[addr] = int(re.search(r"success, PID: (\d+)", r.stdout).group(1))
            return addr

        def crash_worker(addr):
            """SIGKILL the worker we started (a crash, faster than dscli stop)."""
            os.kill(pids[addr], signal.SIGKILL)
            workers.remove(addr)

        for ip in (POOL_A, POOL_B):
            start_worker(ip)
        yield {"workers": list(workers), "etcd": f"{POOL_A}:{cport}", "start_worker": start_worker,
               "crash_worker": crash_worker}
    finally:
        stops = [subprocess.Popen([dscli, "stop", "-w", addr], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, env=clean_env()) for addr in workers]
        deadline = time.monotonic() + 8
        for st in stops:
            try:
                st.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for addr in workers:  # graceful stop is slow when a peer crashed: finish the job by pid
            try:
                os.kill(pids[addr], signal.SIGKILL)
            except ProcessLookupError:
                pass
        for st in stops:
            if st.poll() is None:
                st.kill()
                st.wait(timeout=5)
        etcd.terminate()
        try:
            etcd.wait(timeout=10)
        except subprocess.TimeoutExpired:
            etcd.kill()


def pool_prefill(sim, name, ip, worker, seed, tree, us_per_token=1000):
    env = sim.env(ip, VLLM_ASCEND_SRC=tree, DS_WORKER_ADDR=worker, A3SIM_US_PER_TOKEN=us_per_token,
                  VLLM_RPC_BASE_PATH=sim.path / f"rpc-{name}", A3SIM_DS_CONNECT_TIMEOUT_MS=1500)
    if seed is None:
        env.pop("PYTHONHASHSEED", None)
    else:
        env["PYTHONHASHSEED"] = str(seed)
    (sim.path / f"rpc-{name}").mkdir(exist_ok=True)
    kv = mooncake_cfg("kv_producer", free_range(ip, 2), store="yuanrong", engine_id="0")
    return sim.engine(name, ip, args=["--kv-transfer-config", kv], env=env)


def prefill_request(e, prompt):
    status, body = http("POST", e.base + "/v1/completions",
                        {"model": "glm-5.1", "prompt": prompt, "max_tokens": 1, "min_tokens": 1, "stream": False,
                         "kv_transfer_params": {"do_remote_decode": True, "do_remote_prefill": False,
                                                "remote_engine_id": None, "remote_block_ids": None,
                                                "remote_host": None, "remote_port": None, "aborted_request": []}},
                        timeout=30)
    assert status == 200, body
    return json.loads(body)


@need_pool
def test_pool_hit_across_two_prefill_instances(sim, yr_pool):
    tree = sim.patched_tree()
    a = pool_prefill(sim, "pa", POOL_A, yr_pool["workers"][0], 0, tree)
    b = pool_prefill(sim, "pb", POOL_B, yr_pool["workers"][1], 0, tree)
    a.wait_ready()
    b.wait_ready()
    ipc = sim.path / "rpc-pa" / "lookup_rpc_port_0_dp_rank0"
    assert ipc.is_socket()
    prompt = " ".join(f"p{i:03d}" for i in range(520))  # 520 tokens = 4 full blocks + 8
    ra = prefill_request(a, prompt)
    assert ra["kv_transfer_params"]["remote_host"] == POOL_A and ra["kv_transfer_params"]["do_remote_prefill"]
    rb = prefill_request(b, prompt)
    assert rb["usage"]["prompt_tokens"] == 520
    assert a.metric("vllm:external_prefix_cache_hits_total") == 0
    assert b.metric("vllm:external_prefix_cache_hits_total") == 512
    assert b.metric("vllm:external_prefix_cache_queries_total") == 520
    assert "External prefix cache hit rate: 0.0%" in a.output()
    assert "External prefix cache hit rate: 98.5%" in b.output()
    assert "kvpool hit tokens: 512" in b.output()
    # the hit is what shortens the prefill: the second instance computed only the 8 tokens past the last
    # full block (the simulator charges compute time per computed token; counted, not timed, so a busy
    # machine cannot fail it)

    def by_source(engine, source):
        return sum(v for k, v in engine.metrics().items()
                   if k.startswith("vllm:prompt_tokens_by_source_total{") and f'source="{source}"' in k)
    assert by_source(a, "local_compute") == 520
    assert (by_source(b, "local_compute"), by_source(b, "external_kv_transfer")) == (8, 512)
    assert a.stop() == 0
    assert not ipc.exists(), "IPC lookup socket must be removed on clean exit"


@need_pool
def test_pythonhashseed_mismatch_means_no_external_hit(sim, yr_pool):
    tree = sim.patched_tree()
    a = pool_prefill(sim, "sa", POOL_A, yr_pool["workers"][0], 0, tree, us_per_token=50)
    c = pool_prefill(sim, "sc", POOL_B, yr_pool["workers"][1], 1, tree, us_per_token=50)
    d = pool_prefill(sim, "sd", POOL_B, yr_pool["workers"][1], None, tree, us_per_token=50)
    for e in (a, c, d):
        e.wait_ready()
    prompt = " ".join(f"s{i:03d}" for i in range(400))
    prefill_request(a, prompt)
    prefill_request(c, prompt)
    prefill_request(d, prompt)
    assert c.metric("vllm:external_prefix_cache_hits_total") == 0
    assert d.metric("vllm:external_prefix_cache_hits_total") == 0
    assert "External prefix cache hit rate: 0.0%" in c.output()
    # positive control: same seed on the other node hits
    b = pool_prefill(sim, "sb", POOL_B, yr_pool["workers"][1], 0, tree, us_per_token=50)
    b.wait_ready()
    prefill_request(b, prompt)
    assert b.metric("vllm:external_prefix_cache_hits_total") == 384


@need_pool
def test_pool_errors_are_logged_not_raised(sim, yr_pool):
    """A worker that dies under a running engine degrades to misses; requests still succeed."""
    tree = sim.patched_tree()
    worker = yr_pool["start_worker"](SPARE)
    e = pool_prefill(sim, "perr", SPARE, worker, 0, tree, us_per_token=50)
    e.wait_ready()
    yr_pool["crash_worker"](worker)
    prompt = " ".join(f"e{i:03d}" for i in range(300))
    r = prefill_request(e, prompt)
    assert r["usage"]["completion_tokens"] == 1 and r["kv_transfer_params"]["do_remote_prefill"]
    out = e.output()
    assert "Failed to check keys" in out
    assert "Failed to put keys" in out
    assert "External prefix cache hit rate: 0.0%" in out
    assert e.p.poll() is None


@need_pool
@need_proxy
def test_seed_topology_two_prefill_two_decode_through_proxy(sim, yr_pool):
    """The seed's layout scaled to tp=2: two DP groups of two ranks, MultiConnector with the
    yuanrong pool, the real proxy with 2 prefill + 2 decode backends."""
    tree = sim.patched_tree()
    wa, wb = yr_pool["workers"]
    pre_rpc, dec_rpc = free_port(P0), free_port(D0)
    pre_kv, dec_kv = free_range(P0, 4), free_range(D0, 4)
    for ip in (P1, D1):  # rank 1 binds kv_port + tp .. on its own IP
        for port in (pre_kv + 2, pre_kv + 3, dec_kv + 2, dec_kv + 3):
            with socket.socket() as s:
                s.bind((ip, port))
    nodes = [("p0", P0, 0, "kv_producer", pre_kv, pre_rpc, P0, wa), ("p1", P1, 1, "kv_producer", pre_kv, pre_rpc, P0, wb),
             ("d0", D0, 0, "kv_consumer", dec_kv, dec_rpc, D0, wa), ("d1", D1, 1, "kv_consumer", dec_kv, dec_rpc, D0, wb)]
    engines = {}
    for name, ip, rank, role, kv_port, rpc, dp_addr, worker in nodes:
        kv = json.loads(mooncake_cfg(role, kv_port, ptp=2, pdp=2, dtp=2, ddp=2, store="yuanrong",
                                     engine_id="0" if role == "kv_producer" else None))
        kv["kv_connector_extra_config"]["connectors"][1]["kv_connector_extra_config"]["lookup_rpc_port"] = \
            "0" if role == "kv_producer" else str(rank)
        args = ["--data-parallel-size", "2", "--data-parallel-rank", str(rank), "--data-parallel-address", dp_addr,
                "--data-parallel-rpc-port", str(rpc), "--enable-expert-parallel", "--speculative-config",
                '{"num_speculative_tokens": 3, "method":"deepseek_mtp"}', "--seed", "1024",
                "--additional-config", '{"enable_npugraph_ex": true, "recompute_scheduler_enable" : true}',
                "--max-num-seqs", "8", "--quantization", "ascend", "--enable-auto-tool-choice",
                "--tool-call-parser", "glm47", "--reasoning-parser", "glm45", "--kv-transfer-config", json.dumps(kv)]
        env = sim.env(ip, VLLM_ASCEND_SRC=tree, DS_WORKER_ADDR=worker)
        engines[name] = sim.engine(name, ip, port=free_port(ip), args=args, env=env)
    for e in engines.values():
        e.wait_ready(30)
    for name, rank in (("p0", 0), ("p1", 1), ("d0", 0), ("d1", 1)):
        assert (sim.path / "rpc" / f"lookup_rpc_port_{0 if name[0] == 'p' else rank}_dp_rank{rank}").is_socket()
    proxy = start_proxy(sim, [engines["p0"], engines["p1"]], [engines["d0"], engines["d1"]])
    prompt = "你好, " + " ".join(f"q{i:03d}" for i in range(300))
    for _unused in range(2):
        status, body = http("POST", proxy + "/v1/chat/completions",
                            {"model": "glm-5.1", "messages": [{"role": "user", "content": prompt}],
                             "stream": False, "temperature": 0, "max_tokens": 256}, timeout=30)
        assert status == 200, body
        resp = json.loads(body)
        assert resp["choices"][0]["message"]["content"].startswith("[glm-5.1] 你好, q000 q001")
        assert resp["usage"]["completion_tokens"] > 0
    served = [n for n in ("p0", "p1") if "Delaying free of" in engines[n].output()]
    assert served, "no prefill instance served a do_remote_decode request"
    assert any(f"from mooncake {ip}:{pre_kv + 2 * r}" in engines[n].output()
               for n in ("d0", "d1") for ip, r in ((P0, 0), (P1, 1)))
    # the second identical request hits the local prefix cache of the prefill that served it
    assert sum(engines[n].metric("vllm:prefix_cache_hits_total") for n in served) >= 256
