# -*- coding: utf-8 -*-
"""The vllm-router engine's wrapper as a process (a3_proxy.py --a3-engine vllm-router, beside the stand-in upstream
script, which only parses the arguments in this mode), on free 127.0.0.1 ports:

* with a stand-in router (a script that writes down its argv and its OPENAI_API_KEY, then exits with status 3):
  the child's command line and environment as the wrapper makes them (the engines' key in the environment, never
  on argv), and the wrapper exiting non-zero at once when its child exits;
* with the real vllm-router ($A3_ROUTER_BIN: test.sh installs proxy_router_package's pin into a venv of the
  machine's test cache; without it, .cache/edge-bench/router-venv, which benchmarks/edge_bench.py makes) in front of
  benchmarks/edge_fakes.py's fake engines: /healthcheck 200 once the backends
  are registered, a chat completion through the router, a drain that takes the decode out of the router within
  about 7 s (the router holds a registration about 5 s), an undrain that puts it back. It fails, naming test.sh,
  when no router is there.

Needs pyzmq in this interpreter (the wrapper runs with it): requirements.txt.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from test_proxy_live import clean_env, free_port, wait_until
from wrapper_process import LOCAL, Process, lay_out, parse_metrics, wrapper_argv

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
STANDIN = HERE / "upstream_standin.py"
ROUTER = Path(os.environ.get("A3_ROUTER_BIN") or REPO / ".cache" / "edge-bench" / "router-venv" / "bin" / "vllm-router")
FAKES = REPO / "benchmarks" / "edge_fakes.py"
FAST = ["--a3-probe-interval", "0.5", "--a3-probe-timeout", "1", "--a3-fail-threshold", "2"]

STANDIN_ROUTER = '''#!%s
import json, os, sys, time
with open(%r, "w") as out:
    json.dump({"argv": sys.argv[1:], "key": os.environ.get("OPENAI_API_KEY")}, out)
time.sleep(1.5)
sys.exit(3)
'''


def router_options(bin_path, *extra):
    ports = [free_port() for _unused in range(3)]
    return ports, ["--a3-engine", "vllm-router", "--a3-router-bin", str(bin_path), "--a3-router-port", str(ports[0]),
                   "--a3-router-discovery-port", str(ports[1]), "--a3-router-metrics-port", str(ports[2]), *extra]


def standin_router(tmp_path):
    record = tmp_path / "router-call.json"
    script = tmp_path / "vllm-router"
    script.write_text(STANDIN_ROUTER % (sys.executable, str(record)))
    script.chmod(0o755)
    return script, record


@pytest.mark.parametrize("secrets, key", [({"backend_api_key": "engine-key-9"}, "engine-key-9"), (None, None)])
def test_the_child_and_the_wrapper_exit_with_it(tmp_path, secrets, key):
    script, record = standin_router(tmp_path)
    work = lay_out(tmp_path / "work", STANDIN)
    ports, options = router_options(script, "--a3-router-arg=--policy", "--a3-router-arg=round_robin")
    argv, _unused = wrapper_argv(work, free_port(), free_port(), [(LOCAL, 1)], [(LOCAL, 2)], options=options,
                                 secrets=secrets)
    env = dict(clean_env(), OPENAI_API_KEY="inherited-key")
    wrapper = Process(argv, env, work, "a3_proxy")
    try:
        began = time.monotonic()
        wrapper.proc.wait(timeout=20)
        took = time.monotonic() - began
    finally:
        status = wrapper.stop()
    assert status == 1, wrapper.output()
    assert took < 12, took  # the child lives 1.5 s, the wrapper follows it at once
    out = wrapper.output()
    assert "the router (pid " in out and ") exited with status 3: the proxy stops" in out, out
    call = json.loads(record.read_text())
    assert call == {"argv": ["--vllm-pd-disaggregation", "--vllm-discovery-address", "127.0.0.1:%d" % ports[1],
                             "--host", "127.0.0.1", "--port", str(ports[0]), "--prometheus-host", "127.0.0.1",
                             "--prometheus-port", str(ports[2]), "--policy", "round_robin"],
                    "key": key}  # the secrets' key, else none (the inherited one is removed)
    assert "engine-key-9" not in out  # the key is neither logged nor on a command line the log shows


def test_router_ports_that_collide_with_the_public_listener(tmp_path):
    work = lay_out(tmp_path / "work", STANDIN)
    port = free_port()
    _ports, options = router_options("/bin/false")
    options[options.index("--a3-router-metrics-port") + 1] = str(port)
    argv, _unused = wrapper_argv(work, port, free_port(), [(LOCAL, 1)], [(LOCAL, 2)], options=options)
    done = subprocess.run(argv, cwd=work, env=clean_env(), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "a3_proxy.py: error: --a3-router-metrics-port %d is the public listener's port (--port %d): the router's "
        "ports and the listeners' must differ" % (port, port))


# ----------------------------------------------------------------------------- the real router


def _chat():
    return {"model": "m", "messages": [{"role": "user", "content": "How far is the moon?"}], "max_tokens": 3}


def _real_router_test(tmp_path):
    fake_ports = [free_port(), free_port()]
    fakes = Process([sys.executable, str(FAKES), "serve", "prefill:%d" % fake_ports[0], "decode:%d" % fake_ports[1]],
                    clean_env(), tmp_path, "fakes")
    work = lay_out(tmp_path / "work", STANDIN)
    ports, options = router_options(ROUTER)
    public, admin = free_port(), free_port()
    argv, _unused = wrapper_argv(work, public, admin, [(LOCAL, fake_ports[0])], [(LOCAL, fake_ports[1])],
                                 options=FAST + options)
    wrapper = Process(argv, clean_env(), work, "a3_proxy")
    client = httpx.Client(trust_env=False, timeout=10)
    router = "http://%s:%d/v1/chat/completions" % (LOCAL, ports[0])
    decode = "%s:%d" % (LOCAL, fake_ports[1])
    try:
        def health():
            assert wrapper.proc.poll() is None, wrapper.output()
            try:
                return client.get("http://%s:%d/healthcheck" % (LOCAL, public)).status_code
            except httpx.TransportError:
                return None

        wait_until(lambda: health() == 200, 60, "the public /healthcheck answering 200\n" + wrapper.output())
        # /healthcheck says 200 once the registrations were sent; the router takes them in a moment later
        wait_until(lambda: client.post(router, json=_chat()).status_code == 200, 3, "the router answering")
        answer = client.post(router, json=_chat())
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == " w0 w1 w2"
        models = client.get("http://%s:%d/v1/models" % (LOCAL, public))
        assert models.status_code == 200 and models.json()["data"][0]["id"] == "GLM-5.1-w8a8", models.text
        metrics = parse_metrics(client.get("http://%s:%d/metrics" % (LOCAL, admin)).text)
        assert metrics['a3_proxy_engine_info{engine="vllm-router"}'] == 1 and metrics["a3_proxy_router_up"] == 1

        drained = client.post("http://%s:%d/a3/drain" % (LOCAL, admin), json={"backends": [decode]})
        assert drained.status_code == 200 and drained.json()["changed"] == [decode], drained.text
        began = time.monotonic()
        wait_until(lambda: client.post(router, json=_chat()).status_code == 503, 8,
                   "the router answering 503 after the decode's drain")
        took = time.monotonic() - began
        assert took < 7, took
        backends = client.get("http://%s:%d/a3/backends" % (LOCAL, admin)).json()
        # the snapshot says in_rotation until the router has surely dropped it (5 s and a margin after the
        # last registration): by now it may still say so, never the reverse order
        assert [b["drained"] for b in backends if b["backend"] == decode] == [True]
        wait_until(lambda: not [b for b in client.get("http://%s:%d/a3/backends" % (LOCAL, admin)).json()
                                if b["backend"] == decode][0]["in_rotation"], 8, "in_rotation false after a drain")
        assert client.get("http://%s:%d/healthcheck" % (LOCAL, public)).status_code == 503

        undrained = client.post("http://%s:%d/a3/undrain" % (LOCAL, admin), json={"backends": [decode]})
        assert undrained.status_code == 200, undrained.text
        wait_until(lambda: client.post(router, json=_chat()).status_code == 200, 5,
                   "the router answering again after the undrain")
        wait_until(lambda: health() == 200, 5, "the public /healthcheck answering 200 again")
    finally:
        client.close()
        status = wrapper.stop()
        fakes.stop()
    out = wrapper.output()
    assert status == 0, out
    assert "the router stopped (status" in out, out
    # the router's child went with the wrapper: nothing listens on its port any more
    with pytest.raises(httpx.TransportError):
        httpx.get("http://%s:%d/health" % (LOCAL, ports[0]), timeout=1)


def test_the_real_router_registers_drains_and_undrains(tmp_path):
    assert ROUTER.exists() and os.access(ROUTER, os.X_OK), (
        "no vllm-router at %s: ./test.sh installs it (A3_ROUTER_BIN), or run benchmarks/edge_bench.py once" % ROUTER)
    _real_router_test(tmp_path)


def test_the_wrapper_stops_its_child_on_sigterm(tmp_path):
    """A child that ignores nothing: SIGTERM to the wrapper alone (not its group) stops the child too."""
    script = tmp_path / "vllm-router"
    pid_file = tmp_path / "child.pid"
    script.write_text("#!%s\nimport os, time\nopen(%r, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
                      % (sys.executable, str(pid_file)))
    script.chmod(0o755)
    work = lay_out(tmp_path / "work", STANDIN)
    _ports, options = router_options(script)
    argv, _unused = wrapper_argv(work, free_port(), free_port(), [(LOCAL, 1)], [(LOCAL, 2)], options=options)
    wrapper = Process(argv, clean_env(), work, "a3_proxy")
    try:
        wait_until(lambda: pid_file.exists() and pid_file.read_text(), 30, "the child started\n" + wrapper.output())
        child = int(pid_file.read_text())
        time.sleep(0.5)
        os.kill(wrapper.proc.pid, signal.SIGTERM)
        assert wrapper.proc.wait(timeout=20) == 0, wrapper.output()
        assert not Path("/proc/%d" % child).exists() or "Z" in Path("/proc/%d/stat" % child).read_text().split()[2]
    finally:
        wrapper.stop()
