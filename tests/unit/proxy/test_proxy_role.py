# -*- coding: utf-8 -*-
"""roles/proxy against its wrapper: every file of the package is shipped, the limits' defaults agree with the
wrapper's, the command line the role builds parses with the wrapper's parser and carries no secret, the secrets
file is written in its own call with no_log and no diff."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from a3proxy import cli

from helpers import render_role_vars
from proxy_fakes import FILES

ROOT = Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "proxy"


def _yaml(path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_the_role_ships_every_file_of_the_wrapper():
    sources = _yaml(ROLE / "vars" / "main.yml")["proxy_wrapper_sources"]
    package = sorted(["a3_proxy.py"] + ["a3proxy/" + p.name for p in (FILES / "a3proxy").glob("*.py")])
    assert sorted(s["src"] for s in sources) == package
    for source in sources:
        assert source["dest"] == "{{ a3_host_work_dir }}/" + source["src"] and source["mode"] == "0644"


def test_the_limits_defaults_are_the_wrappers():
    ours, _unused = cli.split_argv([])
    defaults = _yaml(ROLE / "defaults" / "main.yml")
    pairs = {"max-body-bytes": "proxy_max_body_bytes", "max-inflight": "proxy_max_inflight",
             "header-timeout": "proxy_header_timeout", "body-timeout": "proxy_body_timeout",
             "idle-timeout": "proxy_idle_timeout"}
    builtin = dict(flag.split("=", 1) for flag in _yaml(ROLE / "vars" / "main.yml")["proxy_limit_defaults"])
    assert sorted(builtin) == sorted("--a3-" + flag for flag in pairs)
    for flag, var in pairs.items():
        wrapper_default = getattr(ours, "a3_" + flag.replace("-", "_"))
        assert defaults[var] == wrapper_default and float(builtin["--a3-" + flag]) == wrapper_default, flag
        assert str(defaults[var]) == builtin["--a3-" + flag]  # the text the role compares
    assert (_yaml(ROOT / "roles" / "common" / "defaults" / "main.yml")["proxy_admin_port"], ours.a3_admin_port) == \
        (8089, 8089)


def test_the_spec_lists_the_shared_values_the_role_reads():
    """Every value the role reads is declared in its own spec or in roles/common's (its dependency, which declares
    the values several roles share); the secrets with no_log."""
    options = dict(_yaml(ROLE / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"])
    for entry in _yaml(ROOT / "roles" / "common" / "meta" / "argument_specs.yml")["argument_specs"].values():
        for name, spec in (entry.get("options") or {}).items():
            options.setdefault(name, spec)
    for name in ("proxy_api_keys", "proxy_admin_token", "vllm_api_key"):
        assert options[name].get("no_log") is True, name
    for name in ("proxy_admin_bind_host", "proxy_admin_port", "proxy_admin_url", "etcd_tls", "etcd_pki_dir",
                 "proxy_max_body_bytes", "proxy_max_inflight", "proxy_header_timeout", "proxy_body_timeout",
                 "proxy_idle_timeout"):
        assert name in options, name


def test_the_secrets_file_is_written_alone_without_log_or_diff():
    tasks = _yaml(ROLE / "tasks" / "files.yml")
    calls = [t for t in tasks if "ascend.vllm_pd.files" in t]
    assert len(calls) == 4
    wrapper, secrets, edge, keys = calls
    assert "proxy_secrets" not in json.dumps(wrapper) and "proxy_api_keys" not in json.dumps(wrapper)
    (entry,) = secrets["ascend.vllm_pd.files"]["files"]
    assert "proxy_secrets" in entry["content"] and entry["mode"] == "0600"
    assert secrets["no_log"] is True and secrets["diff"] is False
    # proxy_engine vllm-router: haproxy's configuration holds no key; its key list is written alone, 0600, unlogged
    assert "proxy_api_keys" not in json.dumps(edge) and "proxy_edge_files" in json.dumps(edge)
    (entry,) = keys["ascend.vllm_pd.files"]["files"]
    assert "proxy_api_keys" in entry["content"] and entry["mode"] == "0600"
    assert keys["no_log"] is True and keys["diff"] is False
    assert "proxy_edge_keys | default({}) is changed" in (ROLE / "tasks" / "run.yml").read_text()
    run = (ROLE / "tasks" / "run.yml").read_text()
    assert "proxy_secrets_file | default({}) is changed" in run  # a changed secret restarts the proxy


A3 = {"etcd_address": "10.0.0.1:2379", "etcd_endpoints": ["10.0.0.1:2379"], "proxy_ip": "10.0.0.1", "hosts": {"p0": {"ds_worker_addr": "10.0.0.1:18481"}},
      "sides": {"prefill": {"backend_hosts": ["10.0.0.1"], "api_ports": [6700]},
                "decode": {"backend_hosts": ["10.0.0.2"], "api_ports": [6700]}}}


KEYS = ["client-SECRET-1", "client-SECRET-2"]
CASES = {
    "default": {},
    "secured": dict(proxy_api_keys=KEYS, proxy_admin_token="admin-SECRET-3", vllm_api_key="engine-SECRET-4",
                    etcd_tls=True, proxy_max_inflight=1024, proxy_idle_timeout=300, proxy_body_timeout=30,
                    proxy_admin_bind_host="0.0.0.0", proxy_admin_port=9089),
    "engine key": dict(vllm_api_key="engine-key"),
    "bare": dict(proxy_wrapper=False),
}


@pytest.fixture(scope="module")
def rendered():
    """{case: (proxy_argv, proxy_secrets)} as the role's variables make them for each of CASES (ansible-core's
    templating, in one process of its own)."""
    cases = [dict({"a3": A3, "inventory_hostname": "p0"}, **values) for values in CASES.values()]
    files = ("roles/common/defaults/main.yml", "roles/proxy/defaults/main.yml", "roles/proxy/vars/main.yml")
    results = render_role_vars(files, cases, ("proxy_argv", "proxy_secrets"))
    return dict(zip(CASES, (tuple(r) for r in results)))


def test_the_default_command_line_only_adds_the_admin_listener(rendered):
    argv, secrets = rendered["default"]
    assert secrets == {}
    assert argv[:2] == ["python", "a3_proxy.py"]
    assert argv[-4:] == ["--a3-admin-host", "127.0.0.1", "--a3-admin-port", "8089"]
    assert not any(a.startswith(("--a3-secrets-file", "--a3-max", "--a3-header", "--a3-body", "--a3-idle",
                                 "--a3-etcd-")) for a in argv)
    ours, rest = cli.split_argv(argv[2:])
    assert ours.a3_etcd_endpoint.base_url == "http://10.0.0.1:2379"
    assert rest[:4] == ["--port", "8088", "--host", "0.0.0.0"]


def test_secrets_tls_and_limits_on_the_command_line(rendered):
    argv, secrets = rendered["secured"]
    assert secrets == {"api_keys": KEYS, "admin_token": "admin-SECRET-3", "backend_api_key": "engine-SECRET-4"}
    assert not any("SECRET" in a for a in argv)  # secrets never in argv
    ours, _unused = cli.split_argv(argv[2:])
    assert ours.a3_secrets_file == "/workspace/glm5-a3-large-ep/proxy-secrets.json"
    assert (ours.a3_max_inflight, ours.a3_idle_timeout, ours.a3_body_timeout) == (1024, 300.0, 30.0)
    assert "--a3-max-inflight=1024" in argv and not any(a.startswith("--a3-body-timeout") for a in argv)
    assert ours.a3_etcd_endpoint.base_url == "https://10.0.0.1:2379"
    assert (ours.a3_etcd_ca, ours.a3_etcd_cert, ours.a3_etcd_key) == tuple(
        "/workspace/glm5-a3-large-ep/etcd-pki/" + f for f in ("ca.crt", "client.crt", "client.key"))
    assert (ours.a3_admin_host, ours.a3_admin_port) == ("0.0.0.0", 9089)


def test_only_the_set_secrets_go_into_the_file(rendered):
    _unused, secrets = rendered["engine key"]
    assert secrets == {"backend_api_key": "engine-key"}


def test_the_bare_upstream_gets_no_wrapper_option(rendered):
    argv, _unused = rendered["bare"]
    assert argv[1] == "load_balance_proxy_server_example.py" and not any(a.startswith("--a3-") for a in argv)


def test_keepalived_holds_the_virtual_ip_on_a_proxy_host_only_and_is_removed_when_asked():
    """proxy_vip_enabled: a proxy host with proxy_vip set runs keepalived; a host that runs no proxy (the retire play)
    or teardown (proxy_keepalived_remove) removes it, even when proxy_vip comes as an extra var, which no play var
    can override."""
    files = ("roles/common/defaults/main.yml", "roles/proxy/defaults/main.yml", "roles/proxy/vars/main.yml")
    cases = [{"a3": A3, "a3_self": {"is_proxy_host": proxy_host}, "inventory_hostname": "p0", "proxy_vip": vip,
              **({"proxy_keepalived_remove": remove} if remove is not None else {})}
             for vip, proxy_host, remove in (("10.0.0.100", True, None), ("10.0.0.100", False, None),
                                             ("10.0.0.100", True, True), ("", True, None), ("10.0.0.100", True, False))]
    results = render_role_vars(files, cases, ("proxy_vip_enabled",))
    assert [r[0] for r in results] == [True, False, False, False, True]


def test_the_router_gets_the_policy_then_the_sites_flags_and_the_wrapper_parses_them():
    """proxy_router_wrapper_args: the wrapper's own router options, then --policy from proxy_router_policy (default
    round_robin), then proxy_router_args, each as --a3-router-arg=ARG; the wrapper hands them to the router in that
    order after its own flags."""
    files = ("roles/common/defaults/main.yml", "roles/proxy/defaults/main.yml", "roles/proxy/vars/main.yml")
    base = {"a3": A3, "a3_self": {"is_proxy_host": True}, "inventory_hostname": "p0", "a3_work_dir": "/w"}
    cases = [base, {**base, "proxy_router_policy": "cache_aware", "proxy_router_args": {"request-timeout-secs": 600}}]
    results = render_role_vars(files, cases, ("proxy_router_wrapper_args",))
    tails = []
    for (args,) in results:
        ours, rest = cli.split_argv(args)
        assert rest == [] and ours.a3_engine == "vllm-router", args
        tails.append(ours.a3_router_arg)
    assert tails == [["--policy", "round_robin"], ["--policy", "cache_aware", "--request-timeout-secs", "600"]]
