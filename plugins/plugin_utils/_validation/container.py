# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the container role's values: what docker accepts as a registry, image, tag, container name, device,
mount and environment, and mounts that collide."""
from __future__ import annotations

import re

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import (
    ABSENT, ENV_NAME_RE, check_env_names, reads)

# docker: container names are [a-zA-Z0-9][a-zA-Z0-9_.-]+ (daemon/names); image path components are
# lowercase alphanumerics separated by '.', '_', '__' or dashes; a tag is at most 128 word characters,
# dots and dashes, not starting with either (distribution/reference grammar).
_CONTAINER_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_IMAGE_NAME_RE = re.compile(r"^%s(?:/%s)*$" % (_PATH_COMPONENT, _PATH_COMPONENT))
TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_REGISTRY_RE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                          r"|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?(?:/%s)*$" % _PATH_COMPONENT)
_MOUNT_SOURCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@reads("container_registry", "container_image_name", "container_image_tag")
def check_image(h, ctx):
    registry = h.get("container_registry")
    if registry is not ABSENT and registry not in (None, ""):
        if not isinstance(registry, str) or "://" in registry or not _REGISTRY_RE.match(registry.rstrip("/")):
            h.error("container_registry", registry, "set a registry host[:port][/path] without scheme, e.g. "
                    "quay.io or 127.0.0.1:5000, or empty for docker's default")
    name = h.get("container_image_name")
    if name is not ABSENT and not (isinstance(name, str) and _IMAGE_NAME_RE.match(name)):
        h.error("container_image_name", name, "set a lowercase image path without registry or tag, e.g. "
                "ascend/vllm-ascend")
    tag = h.get("container_image_tag")
    if tag is not ABSENT and not (isinstance(tag, str) and TAG_RE.match(tag)):
        h.error("container_image_tag", tag, "set the image tag as a quoted string (letters, digits, '_', '.', "
                "'-', at most 128), e.g. v0.18.0-a3")


@reads("container_name", "proxy_container_name")
def check_names(h, ctx):
    for key in ("container_name", "proxy_container_name"):
        value = h.get(key)
        if value is not ABSENT and not (isinstance(value, str) and _CONTAINER_NAME_RE.match(value)):
            h.error(key, value, "set a docker container name: 2 or more of letters, digits, '_', '.', '-', "
                    "starting with a letter or digit, e.g. yr_glm5")
    engine, proxy = h.get("container_name"), h.get("proxy_container_name")
    if engine is not ABSENT and proxy is not ABSENT and engine == proxy and isinstance(proxy, str):
        h.error("proxy_container_name", proxy, "it is container_name too, so the proxy container would replace "
                "the engines' container: set another name (default: <container_name>_proxy)")


@reads("container_devices", "container_proxy_env", "container_extra_env")
def check_devices_and_env(h, ctx):
    devices = h.get("container_devices")
    if isinstance(devices, list):
        bad = [d for d in devices if isinstance(d, str) and not d.startswith("/")]
        if bad:
            h.error("container_devices", devices, "%s: set device paths, e.g. /dev/davinci_manager"
                    % ", ".join(repr(b) for b in bad))
    check_env_names(h, "container_proxy_env")
    env = h.get("container_extra_env")
    if isinstance(env, dict):
        for key, val in env.items():
            if not ENV_NAME_RE.match(str(key)) or not isinstance(val, str):
                # community.docker refuses non-string env values (ambiguous YAML types must be quoted).
                h.error("container_extra_env", {key: val}, "set variable names with quoted string values, e.g. "
                        "{HF_HUB_OFFLINE: \"1\"}")


def _mounts(h):
    """{container path: [mount spec]} of the mounts; a malformed one is an error."""
    mounts = {}
    for key in ("container_volumes", "container_extra_volumes"):
        value = h.get(key)
        for spec in value if isinstance(value, list) else []:
            if not isinstance(spec, str):
                continue
            parts = spec.split(":")
            if len(parts) not in (2, 3) or not parts[1].startswith("/") or not parts[0] \
                    or not (parts[0].startswith("/") or _MOUNT_SOURCE_RE.match(parts[0])):
                h.error(key, spec, "a mount is host_path:container_path[:options] with absolute paths: set e.g. "
                        "/data:/data or /data:/data:ro")
                continue
            mounts.setdefault(parts[1].rstrip("/") or "/", []).append(spec)
    return mounts


@reads("container_volumes", "container_extra_volumes", "a3_work_dir", "patches_container_dir", "vllm_model_path")
def check_mounts(h, ctx):
    mounts = _mounts(h)
    # The container role mounts these itself (roles/container/vars: container_all_volumes).
    for key in ("a3_work_dir", "patches_container_dir"):
        target = h.get(key)
        if isinstance(target, str) and target.rstrip("/") in mounts:
            h.error(key, target, "docker refuses a second mount at that container path (%s in "
                    "container_volumes/container_extra_volumes): set another directory or drop that mount"
                    % mounts[target.rstrip("/")][0])
    for target, specs in sorted(mounts.items()):
        if len(specs) > 1:
            h.error("container_volumes", specs, "docker refuses two mounts at one container path (%s): set only one "
                    "of them" % target)
    model = h.get("vllm_model_path")
    if isinstance(model, str) and model.startswith("/") and mounts and model.rstrip("/") not in mounts \
            and not any(model.startswith(t.rstrip("/") + "/") for t in mounts):
        h.warn("vllm_model_path", model, "no container_volumes/container_extra_volumes mount covers it, so the "
               "engines in the container will not find the model unless the image has it: add a mount of its "
               "directory to container_extra_volumes (seed: /data:/data) or set the path under a mounted one")
