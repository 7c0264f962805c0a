# -*- coding: utf-8 -*-
# Copyright: contributors to ascend.vllm_pd
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of the hugepages role's values (roles/common's hugepages_target and hugepages_page_size): sizes the
kernel has, and a pool of whole pages that is not empty."""
from __future__ import annotations

from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._topology import parse_size
from ansible_collections.ascend.vllm_pd.plugins.plugin_utils._validation.base import ABSENT, reads

# Hugepage sizes the kernel offers: x86_64 2M and 1G; arm64 64K/2M/32M/1G with 4K base pages and
# 2M/512M/16G with 64K base pages (Documentation/arch/arm64/hugetlbpage.rst).
HUGEPAGE_SIZES = {64 * 1024: "64K", 2 * 1024 ** 2: "2M", 32 * 1024 ** 2: "32M", 512 * 1024 ** 2: "512M",
                  1024 ** 3: "1G", 16 * 1024 ** 3: "16G"}


@reads("hugepages_target", "hugepages_page_size")
def check_whole_pages(ctx):
    """The target is read as sizes and is a whole number of pages."""
    for h in ctx.ordered:
        v = ctx.hosts.get(h, {})
        try:
            target, page = parse_size(v.get("hugepages_target")), parse_size(v.get("hugepages_page_size"))
        except ValueError as exc:
            ctx.errors.append("%s: hugepages_target/hugepages_page_size: %s" % (h, exc))
            continue
        if page <= 0 or target % page:
            ctx.errors.append("%s: hugepages_target %s is not a multiple of the page size %s: set a multiple "
                              "(e.g. 500G)" % (h, v.get("hugepages_target"), v.get("hugepages_page_size")))


def _size(value):
    try:
        return parse_size(value)
    except ValueError:
        return None  # check_whole_pages reports the unreadable size


@reads("hugepages_target", "hugepages_page_size")
def check_pages(h, ctx):
    target, page = h.get("hugepages_target"), h.get("hugepages_page_size")
    size = _size(page) if page is not ABSENT else None
    if size is not None and size not in HUGEPAGE_SIZES:
        h.error("hugepages_page_size", page, "the kernel has no hugepages of that size: set the node's "
                "Hugepagesize (grep Hugepagesize /proc/meminfo), one of %s" % ", ".join(HUGEPAGE_SIZES.values()))
    if target is ABSENT or _size(target) is None:
        return
    page_size = (_size(page) or 0) if page is not ABSENT else 0
    if _size(target) <= 0 or _size(target) < page_size:
        # The role sets vm.nr_hugepages = target / page size: 0 frees the pool the datasystem and the
        # container's shm live in, on every node.
        h.error("hugepages_target", target, "that is zero hugepages, which would free the hugepage pool on "
                "the node: set the pool size, e.g. 500G (seed) or 1T on 2T hosts")
