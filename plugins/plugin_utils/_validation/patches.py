# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the patches role's values: the patch table, the row the image's version selects, the pip pins."""
from __future__ import annotations

import re

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import ABSENT, pep440, reads
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.container import TAG_RE

# The vllm-ascend version in the image tag, exactly as roles/patches/defaults (patches_vllm_ascend_version).
_TAG_VERSION_RE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(rc[0-9]+)?")
# A project name as PEP 508 spells it (packaging's own regular expression for names).
_PIP_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")


@reads("patches_table")
def check_table(h, ctx):
    table = h.get("patches_table")
    if not isinstance(table, dict):
        return
    for version, row in table.items():
        if not isinstance(row, list) or not row:
            h.error("patches_table", {version: row}, "each row is a non-empty list of {file, repo, purpose}: "
                    "set the patches of vllm-ascend %s in order" % version)
            continue
        for item in row:
            ok = isinstance(item, dict)
            file_ = item.get("file") if ok else None
            repo = item.get("repo") if ok else None
            if not (isinstance(file_, str) and file_.strip() and "/" not in file_
                    and isinstance(repo, str) and repo.startswith("/")):
                h.error("patches_table", {version: [item]}, "each patch needs file (a file name in "
                        "patches_src_dir) and repo (the absolute path of the git repository in the container): "
                        "set both, e.g. {file: 0001-x.patch, repo: /vllm-workspace/vllm-ascend, purpose: ...}")
            elif not str(item.get("purpose") or "").strip():
                h.warn("patches_table", {version: [item]}, "a patch without purpose: set purpose (what it fixes; "
                       "the render plan and the docs show it)")


@reads("container_image_tag", "patches_vllm_ascend_version")
def tag_version(h):
    """(version, where from) the patches role will select, or (None, why)."""
    tag = h.get("container_image_tag")
    from_tag = None
    if isinstance(tag, str) and TAG_RE.match(tag):
        match = _TAG_VERSION_RE.search(tag)
        from_tag = match.group(0) if match else None
    override = h.get("patches_vllm_ascend_version")
    # The role default derives it from the tag; templated hostvars show that value, which is no override.
    if override not in (ABSENT, None, "") and str(override) != from_tag:
        return str(override), "patches_vllm_ascend_version"
    if tag is ABSENT or not isinstance(tag, str) or not TAG_RE.match(tag):
        return None, None  # container.check_image reports a malformed tag
    return from_tag, "container_image_tag"


@reads("container_image_tag", "patches_vllm_ascend_version", "patches_table", "vllm_kv_pool_backend",
       choices={"vllm_kv_pool_backend": ("yuanrong",)})
def check_selected_row(h, ctx):
    table = h.get("patches_table")
    version, source = tag_version(h)
    if source == "container_image_tag" and version is None:
        h.error("container_image_tag", h.get("container_image_tag"), "it has no vllm-ascend version (X.Y.Z or "
                "X.Y.ZrcN), so no patch set can be selected: set a tag such as v0.18.0-a3, or set "
                "patches_vllm_ascend_version to a row of patches_table")
    elif version is not None and isinstance(table, dict):
        if version not in table:
            h.error(source, h.get(source), "it selects vllm-ascend %s, which has no row in patches_table (rows: "
                    "%s): the patch set would be empty and the yuanrong backend missing; add a '%s' row to "
                    "patches_table or set patches_vllm_ascend_version to one of its rows"
                    % (version, ", ".join(sorted(str(k) for k in table)) or "none", version))
        elif h.get("vllm_kv_pool_backend") == "yuanrong" and isinstance(table[version], list) and not any(
                "yuanrong" in str((item or {}).get("file", "")).lower() for item in table[version]
                if isinstance(item, dict)):
            h.warn("patches_table", {version: [i.get("file") if isinstance(i, dict) else i for i in table[version]]},
                   "vllm_kv_pool_backend is yuanrong but no patch of this row names yuanrong; vllm-ascend %s has no "
                   "yuanrong backend of its own (patches verify fails): add the 0001-Implement-yuanrong-backend "
                   "patch to the row" % version)


@reads("patches_pip_pins", "patches_pip_extra_args")
def check_pins(h, ctx):
    pins = h.get("patches_pip_pins")
    if isinstance(pins, dict):
        for name, pin in pins.items():
            if not _PIP_NAME_RE.match(str(name)):
                h.error("patches_pip_pins", {name: pin}, "set a package name as pip spells it, e.g. transformers")
            elif isinstance(pin, float):
                h.error("patches_pip_pins", {name: pin}, "YAML read the version as a number (5.10 becomes 5.1): "
                        "set it quoted, e.g. %s: \"%s\"" % (name, pin))
            elif isinstance(pin, bool) or not isinstance(pin, (str, int)) or pep440(pin) is None:
                h.error("patches_pip_pins", {name: pin}, "set the exact version to pin (the role adds '=='), e.g. "
                        "%s: 5.2.0" % name)
            elif pep440(pin) != str(pin):
                # roles/patches/tasks/pip.yml compares the installed version's text with the pin's
                h.warn("patches_pip_pins", {name: pin}, "pip reads it as version %s, and the installed package "
                       "reports that text, which the role compares with the pin's: it would reinstall on every run; "
                       "set %s: \"%s\"" % (pep440(pin), name, pep440(pin)))
    extra = h.get("patches_pip_extra_args")
    if extra is not ABSENT and not isinstance(extra, str):
        h.error("patches_pip_extra_args", extra, "set one string of pip flags, e.g. '--no-deps --force-reinstall'")
