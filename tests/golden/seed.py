# -*- coding: utf-8 -*-
"""Read the values of the seed procedure (../shared/seed/*.txt) straight from its text, so the
render can be compared with the seed itself rather than with a transcription of it."""
from __future__ import annotations

import re
import shlex
from pathlib import Path


def seed_text(shared: Path) -> str:
    files = sorted((shared / "seed").glob("*.txt"))
    if not files:
        raise FileNotFoundError("no seed under %s" % (shared / "seed"))
    return files[0].read_text(encoding="utf-8")


def parse_flags(tokens):
    """['--a', 'x', '--b', '--c', 'y'] -> {'a': 'x', 'b': True, 'c': 'y'} (order kept)."""
    out, i = {}, 0
    while i < len(tokens):
        flag = tokens[i]
        assert flag.startswith("--"), "not a flag: %r in %r" % (flag, tokens)
        if i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            out[flag[2:]] = tokens[i + 1]
            i += 2
        else:
            out[flag[2:]] = True
            i += 1
    return out


def engine_script(text: str, side: str):
    """The seed's run_dp_template.sh of a side: (env {name: value}, unset [names], model, flags)."""
    lines = text.splitlines()
    marker = "#!/bin/bash nic_name="
    found = [l[l.index(marker):] for l in lines if marker in l]
    line = found[0 if side == "prefill" else 1]
    env_part = line[line.index("export "):line.index("vllm serve")]
    env_part = re.sub(r"# (Yuanrong|Mooncake)\b", " ", env_part)
    env, unset, mode = {}, [], None
    for tok in shlex.split(env_part):
        if tok in ("export", "unset"):
            mode = tok
        elif mode == "export":
            key, _unused, value = tok.partition("=")
            env[key] = value
        elif mode == "unset":
            unset.append(tok)
    serve = shlex.split(line[line.index("vllm serve"):].replace(" \\ ", " "))
    return env, unset, serve[2], parse_flags(serve[3:])


def launcher_args(text: str):
    """The four `python launch_online_dp.py ...` lines, node 0..3."""
    return [parse_flags(shlex.split(l)[2:]) for l in text.splitlines() if l.startswith("python launch_online_dp.py ")]


def proxy_args(text: str):
    line = next(l for l in text.splitlines() if "load_balance_proxy_server_example.py" in l and "--port" in l)
    toks = shlex.split(line[line.index("python load_balance"):].replace(" \\ ", " ").rstrip("\\ "))
    out, key = {}, None
    for tok in toks[2:]:
        if tok.startswith("--"):
            key = tok[2:]
            out[key] = []
        else:
            out[key].append(tok)
    return out, re.findall(r"unset (\w+)", line)


def etcd_args(text: str):
    block = text[text.index("etcd \\\n--name"):text.index("> /tmp/etcd.log")]
    return parse_flags(shlex.split(block.replace("\\\n", " "))[1:])


def dscli_args(text: str):
    block = text[text.index("dscli start"):text.index("--liveness_check_path ${LIVENESS_PATH}") + 40]
    toks = shlex.split(block.replace("\\\n", " ").splitlines()[0])
    w = toks.index("-w")
    return toks[2:w], parse_flags(toks[w + 1:])


def yr_env(text: str):
    block = text[text.index("run_yr_worker.sh"):text.index("dscli start --interleave")]
    return dict(re.findall(r"export (\w+)=([^\s]+)", block))


def docker_run(text: str):
    block = text[text.index('docker run --name "${NAME}"'):text.index('"${IMAGES_ID}"')]
    toks = shlex.split(block.replace("\\\n", " "))
    out = {"devices": [], "volumes": [], "env": []}
    i = 2
    while i < len(toks):
        t = toks[i]
        if t in ("-it", "-d"):
            out.setdefault("flags", []).append(t)
        elif t.startswith("--device="):
            out["devices"].append(t.split("=", 1)[1])
        elif t.startswith("--") and "=" in t:
            k, v = t[2:].split("=", 1)
            out[k] = v
        elif t == "-v":
            out["volumes"].append(toks[i + 1])
            i += 1
        elif t == "-e":
            out["env"].append(toks[i + 1].split("=")[0])
            i += 1
        elif t == "-w":
            out["workdir"] = toks[i + 1]
            i += 1
        elif t.startswith("--"):
            out[t[2:]] = toks[i + 1]
            i += 1
        i += 1
    return out


def hugepages_pages(text: str, page: str):
    m = re.search(r"Hugepagesize %s\n# [^\n]*\necho (\d+) > /proc/sys/vm/nr_hugepages" % re.escape(page), text)
    return int(m.group(1))


def pip_pins(text: str):
    return dict(re.findall(r"pip install ([\w_]+)==([\d.]+) --no-deps --force-reinstall", text))
