# -*- coding: utf-8 -*-
"""Every message of the inventory validation for a table of broken inventories, pinned whole: the seed inventory
(tests/unit/plugins/plugin_utils/test_validate_rules.py builds it from the real files) with one or a few values
broken, and the complete list of errors and of new warnings validate() gives for it, each naming the host(s), the
variable, the value and what to set. Operators read these words, so they are the behaviour."""
from __future__ import annotations

import pytest
from test_validate_rules import S, SEED_WARNINGS, V, _args, _on, edge, seed


def _vip(vip, **on_p0):
    """Two proxies (p0, p1, each scraped by its own Prometheus) with proxy_vip, and these values on p0 only."""
    inv = seed(a3_proxy_hosts=["p0", "p1"], monitoring_hosts=["p0", "p1"], proxy_vip=vip)
    inv["hosts"]["p0"].update(on_p0)
    return inv


# The warnings of an environment that sets none of the values the seed derives per node (both sides).
DERIVED_ENV_MISSING = [
    'p0, p1: ASCEND_RT_VISIBLE_DEVICES (vllm_env_common + vllm_prefill_env + vllm_env_extra) is not set: the '
    'seed sets it to $1 (the chips launch_online_dp.py gives each dp rank): set ASCEND_RT_VISIBLE_DEVICES: $1 '
    'in vllm_env_common',
    'p0, p1: GLOO_SOCKET_IFNAME (vllm_env_common + vllm_prefill_env + vllm_env_extra) is not set: the seed '
    'sets it to $nic_name (the business NIC): set GLOO_SOCKET_IFNAME: $nic_name in vllm_env_common',
    'p0, p1: HCCL_IF_IP (vllm_env_common + vllm_prefill_env + vllm_env_extra) is not set: the seed sets it to '
    "$local_ip (the node's business IP): set HCCL_IF_IP: $local_ip in vllm_env_common",
    'p0, p1: HCCL_SOCKET_IFNAME (vllm_env_common + vllm_prefill_env + vllm_env_extra) is not set: the seed '
    'sets it to $nic_name (the business NIC): set HCCL_SOCKET_IFNAME: $nic_name in vllm_env_common',
    'p0, p1: TP_SOCKET_IFNAME (vllm_env_common + vllm_prefill_env + vllm_env_extra) is not set: the seed sets '
    'it to $nic_name (the business NIC): set TP_SOCKET_IFNAME: $nic_name in vllm_env_common',
    'd0, d1: ASCEND_RT_VISIBLE_DEVICES (vllm_env_common + vllm_decode_env + vllm_env_extra) is not set: the '
    'seed sets it to $1 (the chips launch_online_dp.py gives each dp rank): set ASCEND_RT_VISIBLE_DEVICES: $1 '
    'in vllm_env_common',
    'd0, d1: GLOO_SOCKET_IFNAME (vllm_env_common + vllm_decode_env + vllm_env_extra) is not set: the seed sets '
    'it to $nic_name (the business NIC): set GLOO_SOCKET_IFNAME: $nic_name in vllm_env_common',
    'd0, d1: HCCL_IF_IP (vllm_env_common + vllm_decode_env + vllm_env_extra) is not set: the seed sets it to '
    "$local_ip (the node's business IP): set HCCL_IF_IP: $local_ip in vllm_env_common",
    'd0, d1: HCCL_SOCKET_IFNAME (vllm_env_common + vllm_decode_env + vllm_env_extra) is not set: the seed sets '
    'it to $nic_name (the business NIC): set HCCL_SOCKET_IFNAME: $nic_name in vllm_env_common',
    'd0, d1: TP_SOCKET_IFNAME (vllm_env_common + vllm_decode_env + vllm_env_extra) is not set: the seed sets '
    'it to $nic_name (the business NIC): set TP_SOCKET_IFNAME: $nic_name in vllm_env_common',
]


CASES = [
    pytest.param(seed(container_registry="https://quay.io"), [
        "p0, p1, d0, d1: container_registry is 'https://quay.io': set a registry host[:port][/path] without "
        "scheme, e.g. quay.io or 127.0.0.1:5000, or empty for docker's default",
    ], [], id='registry'),
    pytest.param(seed(container_registry=5), [
        'p0, p1, d0, d1: container_registry is 5: set a registry host[:port][/path] without scheme, e.g. quay.io '
        "or 127.0.0.1:5000, or empty for docker's default",
    ], [], id='registry_int'),
    pytest.param(seed(container_image_name="Ascend/x"), [
        "p0, p1, d0, d1: container_image_name is 'Ascend/x': set a lowercase image path without registry or tag, "
        'e.g. ascend/vllm-ascend',
    ], [], id='image_name'),
    pytest.param(seed(container_image_tag="v0.18.0 a3"), [
        "p0, p1, d0, d1: container_image_tag is 'v0.18.0 a3': set the image tag as a quoted string (letters, "
        "digits, '_', '.', '-', at most 128), e.g. v0.18.0-a3",
    ], [], id='tag'),
    pytest.param(seed(container_name="y"), [
        "p0, p1, d0, d1: container_name is 'y': set a docker container name: 2 or more of letters, digits, '_', "
        "'.', '-', starting with a letter or digit, e.g. yr_glm5",
    ], [], id='cname'),
    pytest.param(seed(proxy_container_name="yr_glm5"), [
        "p0, p1, d0, d1: proxy_container_name is 'yr_glm5': it is container_name too, so the proxy container would "
        "replace the engines' container: set another name (default: <container_name>_proxy)",
    ], [], id='pcname_same'),
    pytest.param(seed(container_devices=["davinci0", "/dev/x", "rel"]), [
        "p0, p1, d0, d1: container_devices is ['davinci0', '/dev/x', 'rel']: 'davinci0', 'rel': set device paths, "
        'e.g. /dev/davinci_manager',
    ], [], id='devices'),
    pytest.param(seed(container_extra_env={"A": 1, "B-C": "x", "D": "ok"}), [
        "p0, p1, d0, d1: container_extra_env is {'A': 1}: set variable names with quoted string values, e.g. "
        '{HF_HUB_OFFLINE: "1"}',
        "p0, p1, d0, d1: container_extra_env is {'B-C': 'x'}: set variable names with quoted string values, e.g. "
        '{HF_HUB_OFFLINE: "1"}',
    ], [], id='extra_env'),
    pytest.param(seed(container_extra_volumes=["/data", "x:y", ":/a", "/a:/b:ro:z", "name:/vol", "-bad:/v"]), [
        "p0, p1, d0, d1: container_extra_volumes is '/data': a mount is host_path:container_path[:options] with "
        'absolute paths: set e.g. /data:/data or /data:/data:ro',
        "p0, p1, d0, d1: container_extra_volumes is 'x:y': a mount is host_path:container_path[:options] with "
        'absolute paths: set e.g. /data:/data or /data:/data:ro',
        "p0, p1, d0, d1: container_extra_volumes is ':/a': a mount is host_path:container_path[:options] with "
        'absolute paths: set e.g. /data:/data or /data:/data:ro',
        "p0, p1, d0, d1: container_extra_volumes is '/a:/b:ro:z': a mount is host_path:container_path[:options] "
        'with absolute paths: set e.g. /data:/data or /data:/data:ro',
        "p0, p1, d0, d1: container_extra_volumes is '-bad:/v': a mount is host_path:container_path[:options] with "
        'absolute paths: set e.g. /data:/data or /data:/data:ro',
    ], [], id='volumes'),
    pytest.param(seed(container_extra_volumes=["/srv:/workspace/glm5-a3-large-ep/"]), [
        "p0, p1, d0, d1: a3_work_dir is '/workspace/glm5-a3-large-ep': docker refuses a second mount at that "
        'container path (/srv:/workspace/glm5-a3-large-ep/ in container_volumes/container_extra_volumes): set '
        'another directory or drop that mount',
    ], [], id='workdir_mount'),
    pytest.param(seed(container_extra_volumes=["/srv:/data/"]), [
        "p0, p1, d0, d1: container_volumes is ['/data:/data', '/srv:/data/']: docker refuses two mounts at one "
        'container path (/data): set only one of them',
    ], [], id='two_mounts'),
    pytest.param(seed(vllm_model_path="/datax/m"), [], [
        "p0, p1, d0, d1: vllm_model_path is '/datax/m': no container_volumes/container_extra_volumes mount covers "
        'it, so the engines in the container will not find the model unless the image has it: add a mount of its '
        'directory to container_extra_volumes (seed: /data:/data) or set the path under a mounted one',
    ], id='model_unmounted'),
    pytest.param(seed(etcd_version="3.5.12"), [
        "p0: etcd_version is '3.5.12': the release archive is etcd-<version>-linux-<arch>.tar.gz: set vX.Y.Z, e.g. "
        'v3.5.12',
    ], [], id='etcd_version'),
    pytest.param(seed(etcd_version="v3.5.13"), [
        "p0: etcd_version is 'v3.5.13': etcd_checksums has no sha256 for it and etcd_archive_src is empty, so the "
        "download is refused on the node: add etcd_checksums['v3.5.13'] (amd64/arm64 from the release's "
        'SHA256SUMS) or set etcd_archive_src to an archive on the controller',
    ], [], id='etcd_version_nosum'),
    pytest.param(seed(etcd_checksums={"v3.5.12": {"amd64": "abc", "arm64": "sha256:" + "0" * 64}, "v9": "x"}), [
        "p0: etcd_checksums is {'v3.5.12': {'amd64': 'abc', 'arm64': "
        "'sha256:0000000000000000000000000000000000000000000000000000000000000000'}}: set {amd64: sha256:<64 hex>, "
        "arm64: sha256:<64 hex>} from the release's SHA256SUMS",
        "p0: etcd_checksums is {'v9': 'x'}: set {amd64: sha256:<64 hex>, arm64: sha256:<64 hex>} from the "
        "release's SHA256SUMS",
    ], [], id='etcd_sums'),
    pytest.param(seed(etcd_name="etcd single"), [
        "p0: etcd_name is 'etcd single': it goes into --initial-cluster <name>=<url>: set letters, digits, '.', "
        "'_' or '-', e.g. etcd-single",
    ], [], id='etcd_name'),
    pytest.param(seed(etcd_download_base_url="ftp://x"), [
        "p0: etcd_download_base_url is 'ftp://x': set an http(s) URL of the release directory, e.g. "
        'https://github.com/etcd-io/etcd/releases/download',
    ], [], id='etcd_url'),
    pytest.param(seed(etcd_version="v3.5.13", etcd_download_base_url="ftp://x", etcd_archive_src="/tmp/etcd.tgz"), [],
                 [], id='etcd_archive'),
    pytest.param(seed(etcd_tls_renew_days=400), [
        'p0: etcd_tls_renew_days is 400: it is not below etcd_tls_cert_days (365), so every run would reissue the '
        'certificates and restart etcd and the workers: set fewer days (default 30)',
    ], [], id='tls_days'),
    pytest.param(seed(hugepages_target="0"), [
        "p0, p1, d0, d1: hugepages_target is '0': that is zero hugepages, which would free the hugepage pool on "
        'the node: set the pool size, e.g. 500G (seed) or 1T on 2T hosts',
    ], [], id='hp_zero'),
    pytest.param(seed(hugepages_page_size="4M", hugepages_target="512G"), [
        "p0, p1, d0, d1: hugepages_page_size is '4M': the kernel has no hugepages of that size: set the node's "
        'Hugepagesize (grep Hugepagesize /proc/meminfo), one of 64K, 2M, 32M, 512M, 1G, 16G',
    ], [], id='hp_page'),
    pytest.param(seed(hugepages_target="lots"), [
        "p0, p1, d0, d1: hugepages_target/hugepages_page_size: cannot read size 'lots': use a number with a unit, "
        'e.g. 500G, 1T, 128M',
    ], [], id='hp_bad'),
    pytest.param(seed(hugepages_target="1537M", hugepages_page_size="1G"), [
        'p0, p1, d0, d1: hugepages_target 1537M is not a multiple of the page size 1G: set a multiple (e.g. 500G)',
    ], [], id='hp_notmultiple'),
    pytest.param(seed(container_image_tag="v0.19.0-a3"), [
        "p0, p1, d0, d1: container_image_tag is 'v0.19.0-a3': it selects vllm-ascend 0.19.0, which has no row in "
        'patches_table (rows: 0.18.0, 0.18.0rc1): the patch set would be empty and the yuanrong backend missing; '
        "add a '0.19.0' row to patches_table or set patches_vllm_ascend_version to one of its rows",
    ], [], id='patch_norow'),
    pytest.param(seed(container_image_tag="latest"), [
        "p0, p1, d0, d1: container_image_tag is 'latest': it has no vllm-ascend version (X.Y.Z or X.Y.ZrcN), so no "
        'patch set can be selected: set a tag such as v0.18.0-a3, or set patches_vllm_ascend_version to a row of '
        'patches_table',
    ], [], id='patch_noversion'),
    pytest.param(seed(patches_pip_pins={"transformers": 5.1, "bad name!": "1", "x": True, "y": ">=1", "z": 3}), [
        "p0, p1, d0, d1: patches_pip_pins is {'transformers': 5.1}: YAML read the version as a number (5.10 "
        'becomes 5.1): set it quoted, e.g. transformers: "5.1"',
        "p0, p1, d0, d1: patches_pip_pins is {'bad name!': '1'}: set a package name as pip spells it, e.g. "
        'transformers',
        "p0, p1, d0, d1: patches_pip_pins is {'x': True}: set the exact version to pin (the role adds '=='), e.g. "
        'x: 5.2.0',
        "p0, p1, d0, d1: patches_pip_pins is {'y': '>=1'}: set the exact version to pin (the role adds '=='), e.g. "
        'y: 5.2.0',
    ], [], id='pins'),
    pytest.param(seed(patches_pip_extra_args=["--no-deps"]), [
        "p0, p1, d0, d1: patches_pip_extra_args is ['--no-deps']: set one string of pip flags, e.g. '--no-deps "
        "--force-reinstall'",
    ], [], id='pip_extra'),
    pytest.param(seed(preflight_page_size=5000), [
        'p0, p1, d0, d1: preflight_page_size is 5000: set the kernel page size in bytes (getconf PAGE_SIZE): 4096, '
        'or 65536 with the 64k openYuanrong package',
    ], [], id='pp_page'),
    pytest.param(seed(preflight_min_hdk="25.5.RC1", preflight_min_cann=""), [
        'p0, p1, d0, d1: preflight_min_hdk is \'25.5.RC1\': set a dotted version such as 25.5.0, or "" to skip the '
        'check',
    ], [], id='pp_ver'),
    pytest.param(seed(preflight_memory_reserve="lots"), [
        "p0, p1, d0, d1: preflight_memory_reserve is 'lots': set a size such as 16G, or 0",
    ], [], id='pp_reserve'),
    pytest.param(seed(preflight_port_owner_names=["^vllm$", "("]), [
        "p0, p1, d0, d1: preflight_port_owner_names is '(': not a regular expression (missing ), unterminated "
        'subpattern at position 0): set a valid Python regular expression (escape literal characters with \\)',
    ], [], id='pp_regex'),
    pytest.param(seed(gate_expect_pattern="READY("), [
        "p0, p1, d0, d1: gate_expect_pattern is 'READY(': not a regular expression (missing ), unterminated "
        'subpattern at position 5): set a valid Python regular expression (escape literal characters with \\)',
    ], [], id='gate_regex'),
    pytest.param(seed(proxy_extra_args={"port": 9000, "a3-x": 1, "--m": 1, "max-retries": True}), [
        "p0: proxy_extra_args is {'port': 9000}: the role sets --port itself (from the topology and the proxy_* "
        'variables): remove it',
        "p0: proxy_extra_args is {'a3-x': 1}: the role sets --a3-x itself (from the topology and the proxy_* "
        'variables): remove it',
        "p0: proxy_extra_args is {'--m': 1}: set the proxy's flag without dashes, e.g. max-retries: 3",
        "p0: proxy_extra_args is {'max-retries': True}: the proxy takes '--max-retries <value>': set a number or a "
        'string',
    ], [], id='proxy_args'),
    pytest.param(edge(proxy_relay_capacity=20000, proxy_tokens_per_sequence=40), [], [
        "p0: proxy_relay_capacity is 20000: 8 decode instances (2 hosts x 4, 1 DP group) x max-num-seqs 64 x "
        "proxy_tokens_per_sequence 40 = 20480 tokens/s at full load, above this relay capacity of the proxy's one "
        "process, which every streamed token passes through: the streams would slow down at the proxy, not at the "
        "engines: measure the relay on this proxy host with benchmarks/edge_bench.py (the collection's source "
        "repository) and set proxy_relay_capacity to the streamed tokens/s it reports, or reduce the layout (fewer decode instances or a lower max-num-seqs "
        "in vllm_decode_serve_args), or set proxy_engine to vllm-router, whose relay carries several times more (docs/capacity.md)",
    ], id='relay_capacity'),
    pytest.param(edge(proxy_relay_capacity=20480, proxy_tokens_per_sequence=40), [], [], id='relay_capacity_equal'),
    pytest.param(seed(proxy_relay_capacity=0, proxy_tokens_per_sequence=-1), [
        'p0, p1, d0, d1: proxy_tokens_per_sequence is -1: set an integer >= 1',
        'p0, p1, d0, d1: proxy_relay_capacity is 0: set an integer >= 1',
    ], [], id='relay_not_positive'),
    pytest.param(seed(proxy_unset_env=["OK", "BAD-1"]), [
        "p0, p1, d0, d1: proxy_unset_env is ['OK', 'BAD-1']: 'BAD-1' are not environment variable names: set names "
        'such as http_proxy',
    ], [], id='unset_env'),
    pytest.param(seed(supervise_engine_service="ascend-vllm.service"), [
        "p0, p1, d0, d1: supervise_engine_service is 'ascend-vllm.service': set a systemd unit name without "
        ".service (letters, digits, ':', '_', '.', '-'), e.g. ascend-vllm",
    ], [], id='units'),
    pytest.param(seed(supervise_engine_service="ascend-yr-worker"), [
        "p0, p1, d0, d1: supervise_engine_service is 'ascend-yr-worker': supervise_worker_service has the same "
        'unit name: set different names',
    ], [], id='units_same'),
    pytest.param(seed(supervise_backoff_max=1, supervise_backoff_base=2), [], [
        'p0, p1, d0, d1: supervise_backoff_max is 1: it is below supervise_backoff_base (2), so every restart '
        'waits the cap: set it at least as large',
    ], id='backoff'),
    pytest.param(seed(vllm_health_interval=60, vllm_health_timeout=60), [
        'p0, p1, d0, d1: vllm_health_interval is 60: it is not below vllm_health_timeout (60), so the start is '
        'judged on one poll: set a shorter interval (default 5)',
    ], [], id='health'),
    pytest.param(seed(vllm_peer_wait=100), [], [
        'p0, p1, d0, d1: vllm_peer_wait is 100: it is below vllm_down_grace + 2 x vllm_canary_interval (180): ranks '
        'stalled by a frozen peer would restart before the peer\'s own node restarts it, and their group cannot form '
        'while it stays frozen: set at least 180',
    ], id='peer_wait'),
    pytest.param(seed(vllm_log_file="../x.log"), [
        "p0, p1, d0, d1: vllm_log_file is '../x.log': it is a file name in a3_work_dir: set e.g. vllm_log.log",
    ], [], id='logfile'),
    pytest.param(seed(yuanrong_node_dead_timeout_s=20), [
        'p0, p1, d0, d1: yuanrong_node_dead_timeout_s is 20: the datasystem worker refuses to start unless it is '
        'greater than yuanrong_node_timeout_s (20): set a larger value (seed: 20 and 30)',
    ], [], id='yr_timeouts'),
    pytest.param(seed(yuanrong_node_timeout_s=1), [], [
        "p0, p1, d0, d1: yuanrong_node_timeout_s is 1: the worker's etcd heartbeat is 1000 ms and must stay below "
        'node_timeout_s x 1000: set 2 or more (seed: 20)',
    ], id='yr_node1'),
    pytest.param(seed(yuanrong_wheel_url="https://example.invalid/datasystem.tar.gz"), [
        "p0, p1, d0, d1: yuanrong_wheel_url is 'https://example.invalid/datasystem.tar.gz': yuanrong_install_from "
        "is url: set the wheel's URL, e.g. "
        'https://.../openyuanrong_datasystem-0.7.6rc1-cp311-cp311-manylinux_2_35_aarch64.whl',
    ], [], id='yr_wheel'),
    pytest.param(seed(yuanrong_package_version="0.7.5"), [], [
        'p0, p1, d0, d1: yuanrong_wheel_url is '
        "'https://gitcode.com/openeuler/yuanrong-datasystem/releases/download/v0.7.6.rc1/openyuanrong_datasystem-"
        "0.7.6rc1-cp311-cp311-manylinux_2_35_aarch64.whl': "
        'the wheel is version 0.7.6rc1 but yuanrong_package_version is 0.7.5: the role compares the installed '
        'version with the latter and reinstalls on every run; set them to the same version',
    ], id='yr_wheel_ver'),
    pytest.param(seed(yuanrong_install_from="file", yuanrong_wheel_src="rel.tar"), [
        "p0, p1, d0, d1: yuanrong_wheel_src is 'rel.tar': yuanrong_install_from is file: set the wheel's path, "
        'e.g. /path/on/the/controller/openyuanrong_datasystem-0.8.1-cp311-cp311-manylinux_2_34_x86_64.whl',
    ], [], id='yr_file'),
    pytest.param(seed(yuanrong_worker_flags={"node_timeout_s": 5, "--x": 1, "y": None, "z": True}), [
        "p0, p1, d0, d1: yuanrong_worker_flags is {'node_timeout_s': 5}: the role sets --node_timeout_s itself: "
        'set yuanrong_node_timeout_s instead',
        "p0, p1, d0, d1: yuanrong_worker_flags is {'--x': 1}: set the worker's flag without dashes, e.g. "
        'rpc_thread_num: 32',
        "p0, p1, d0, d1: yuanrong_worker_flags is {'y': None}: the worker takes '--y <value>': set a number, a "
        'string or a boolean',
    ], [], id='yr_flags'),
    pytest.param(seed(yuanrong_curve_zmq=True), [
        "p0, p1, d0, d1: yuanrong_curve_zmq is True: the workers would refuse the engines: vllm-ascend's yuanrong "
        'backend connects without the CURVE client keys, which the vllm role does not pass yet (the KV pool would '
        "break silently): set false and keep the worker port on the business network (README 'Security')",
    ], [], id='curve'),
    pytest.param(seed(a3_listen_address="localhost"), [
        "p0, p1, d0, d1: a3_listen_address is 'localhost': set an IP address: 0.0.0.0 (every address, the seed) or "
        "the node's business IP (a3_business_ip)",
    ], [], id='listen'),
    pytest.param(seed(a3_listen_address="10.9.9.9"), [
        "p0, p1, d0, d1: a3_listen_address is '10.9.9.9': the roles reach every service on the node's business IP "
        "(a3_business_ip), which this address does not cover: set 0.0.0.0 or the node's business IP",
    ], [], id='listen_other'),
    pytest.param(seed(proxy_admin_bind_host="192.0.2.99"), [
        "p0: proxy_admin_bind_host is '192.0.2.99': set 127.0.0.1 (the proxy host's loopback, the default: the "
        "roles call the admin listener from that host), the proxy host's business IP or 0.0.0.0",
    ], [], id='admin_bind'),
    pytest.param(seed(proxy_admin_bind_host="0.0.0.0"), [], [
        "p0: proxy_admin_bind_host is '0.0.0.0': the proxy's admin listener (drain, /instances/add) is reachable "
        'from the network without a token: set proxy_admin_token (Ansible Vault) or keep 127.0.0.1',
    ], id='admin_any'),
    pytest.param(seed(proxy_api_keys=["good", "has space", "good", 7, "<key>", " lead"]), [
        'p0: proxy_api_keys[1] contains white space, a quote or a backslash, which an HTTP header cannot carry: '
        'set another value',
        'p0: proxy_api_keys[3] is not a string: set a quoted string (Ansible Vault gives one)',
        'p0: proxy_api_keys[4] is still a placeholder: set the real value',
        'p0: proxy_api_keys[5] contains white space, a quote or a backslash, which an HTTP header cannot carry: '
        'set another value',
        'p0: proxy_api_keys lists a key twice: remove the repeated one',
    ], [
        "listeners that take requests without credentials: the engines' /v1 routes (set vllm_api_key); etcd on p0 "
        "(set etcd_tls: true). That is the seed's configuration; README 'Security' says how to turn each "
        'protection on',
    ], id='keys'),
    pytest.param(seed(proxy_api_keys="x"), [
        'p0: proxy_api_keys is not a list: set a list of keys (Ansible Vault), or [] for none',
    ], [
        "listeners that take requests without credentials: the engines' /v1 routes (set vllm_api_key); etcd on p0 "
        "(set etcd_tls: true). That is the seed's configuration; README 'Security' says how to turn each "
        'protection on',
    ], id='keys_str'),
    pytest.param(seed(proxy_admin_token='se"cret', vllm_api_key=5), [
        'p0: proxy_admin_token contains white space, a quote or a backslash, which an HTTP header cannot carry: '
        'set another value',
        'p0: vllm_api_key is not a string: set a quoted string (Ansible Vault gives one)',
    ], [
        "listeners that take requests without credentials: the proxy's public port (set proxy_api_keys); etcd on "
        "p0 (set etcd_tls: true). That is the seed's configuration; README 'Security' says how to turn each "
        'protection on',
    ], id='secrets'),
    pytest.param(seed(monitoring_prometheus_web_users={"ops": "plain", "b": 5}, monitoring_prometheus_web_user="root",
                      monitoring_prometheus_web_password=""), [
        'p0: monitoring_prometheus_web_users: the value of b, ops is not a bcrypt hash: set the output of '
        "'htpasswd -nBC 10 USER' after the colon (Prometheus' web config takes hashes)",
        "p0: monitoring_prometheus_web_user is 'root': the role's own calls log in as this user, which "
        'monitoring_prometheus_web_users does not list: set one of b, ops',
        "p0: monitoring_prometheus_web_password is not set: the role's own calls need the password of "
        'monitoring_prometheus_web_user (Ansible Vault)',
    ], [], id='web_users'),
    pytest.param(seed(monitoring_prometheus_web_users=["x"]), [
        'p0: monitoring_prometheus_web_users is (not shown): set a mapping {user: bcrypt hash}',
    ], [], id='web_users_list'),
    pytest.param(seed(vllm_kv_top_level_extra={"kv_role": "x", "kv_connector_extra_config": {}, "engine_id": "1",
                                               "kv_load_failure_policy": "retry"}), [
        "p0, p1, d0, d1: vllm_kv_top_level_extra is {'kv_role': 'x'}: it replaces the MultiConnector's own "
        'kv_role, which breaks the P/D transfer and the pool: remove it',
        "p0, p1, d0, d1: vllm_kv_top_level_extra is {'kv_load_failure_policy': 'retry'}: vLLM 0.18.0 accepts only "
        'recompute or fail and refuses to start otherwise (vllm/config/kv_transfer.py@v0.18.0): set one of them',
    ], [
        "p0, p1, d0, d1: vllm_kv_top_level_extra is {'kv_connector_extra_config': {}}: kv_connector_extra_config "
        'is derived (the connector list is written over it): remove it',
        "p0, p1, d0, d1: vllm_kv_top_level_extra is {'engine_id': '1'}: engine_id is derived (set "
        'vllm_<side>_engine_id instead): remove it',
    ], id='top_extra'),
    pytest.param(seed(vllm_mooncake_extra_config={"prefill": {}, "decode": 1, "kv_load_failure_policy": "recompute"}), [
        "p0, p1, d0, d1: vllm_mooncake_extra_config is {'kv_load_failure_policy': 'recompute'}: it lands in the "
        "Mooncake child connector's kv_connector_extra_config, where nothing reads it, so failed KV loads still "
        'fail the request (vLLM v0.18.0: vllm/v1/core/sched/scheduler.py reads '
        'kv_transfer_config.kv_load_failure_policy of the top level; multi_connector.py builds each child from its '
        'own dict): remove it here and set it in vllm_kv_top_level_extra',
    ], [
        "p0, p1, d0, d1: vllm_mooncake_extra_config is {'prefill': {}}: the prefill dp/tp block is derived from "
        'the topology and replaces this: remove it',
        "p0, p1, d0, d1: vllm_mooncake_extra_config is {'decode': 1}: the decode dp/tp block is derived from the "
        'topology and replaces this: remove it',
    ], id='mc_extra'),
    pytest.param(seed(vllm_prefill_engine_id=True, vllm_decode_engine_id=[1]), [
        'p0, p1, d0, d1: vllm_prefill_engine_id is True: set a quoted string (seed: "0" on prefill) or null',
        'p0, p1, d0, d1: vllm_decode_engine_id is [1]: set a quoted string (seed: "0" on prefill) or null',
    ], [], id='engine_id'),
    pytest.param(seed(vllm_env_extra={"BAD-NAME": "1", "N": 5, "T": True, "F": False, "Z": None}), [
        "p0, p1, d0, d1: vllm_env_extra is {'BAD-NAME': '1'}: 'BAD-NAME' is not an environment variable name (bash "
        "refuses 'export' of it when the engines start): set a name of letters, digits and '_'",
        "p0, p1, d0, d1: vllm_env_extra is {'N': 5}: environment values are written as text, and unquoted YAML "
        'numbers, booleans and null do not come out as written (true -> True, null -> None, 010 -> 8): set it '
        'quoted, e.g. N: "5"',
        "p0, p1, d0, d1: vllm_env_extra is {'T': True}: environment values are written as text, and unquoted YAML "
        'numbers, booleans and null do not come out as written (true -> True, null -> None, 010 -> 8): set it '
        'quoted, e.g. T: "1"',
        "p0, p1, d0, d1: vllm_env_extra is {'F': False}: environment values are written as text, and unquoted YAML "
        'numbers, booleans and null do not come out as written (true -> True, null -> None, 010 -> 8): set it '
        'quoted, e.g. F: "0"',
        "p0, p1, d0, d1: vllm_env_extra is {'Z': None}: environment values are written as text, and unquoted YAML "
        'numbers, booleans and null do not come out as written (true -> True, null -> None, 010 -> 8): set it '
        'quoted, e.g. Z: ""',
    ], [], id='env_name'),
    pytest.param(seed(vllm_env_unset=["PYTHONHASHSEED"]), [
        "p0, p1, d0, d1: vllm_env_unset is ['PYTHONHASHSEED']: it removes PYTHONHASHSEED, so every engine hashes "
        'KV blocks with its own random seed and the pool never hits: take PYTHONHASHSEED out of vllm_env_unset',
    ], [], id='env_unset_seed'),
    pytest.param(seed(vllm_env_unset=["HCCL_IF_IP", "DS_WORKER_ADDR"]), [
        "p0, p1, d0, d1: vllm_env_unset is ['DS_WORKER_ADDR', 'HCCL_IF_IP']: vllm_env_unset removes it; the "
        "engines need this node's openYuanrong worker (<business IP>:yuanrong_worker_port) there (DS_WORKER_ADDR): "
        'take DS_WORKER_ADDR out of vllm_env_unset',
    ], [
        "p0, p1, d0, d1: vllm_env_unset is ['DS_WORKER_ADDR', 'HCCL_IF_IP']: vllm_env_unset removes it; the "
        "engines need the node's business IP there (HCCL_IF_IP): take HCCL_IF_IP out of vllm_env_unset",
    ], id='env_unset_derived'),
    pytest.param(seed(vllm_env_extra={"PYTHONHASHSEED": "random"}), [
        'p0, p1: PYTHONHASHSEED (vllm_env_common + vllm_prefill_env + vllm_env_extra, set in vllm_env_extra) is '
        "'random': Python accepts 'random' or an integer 0..4294967295 and the pool needs one fixed value: set a "
        'quoted integer, e.g. "0"',
        'd0, d1: PYTHONHASHSEED (vllm_env_common + vllm_decode_env + vllm_env_extra, set in vllm_env_extra) is '
        "'random': Python accepts 'random' or an integer 0..4294967295 and the pool needs one fixed value: set a "
        'quoted integer, e.g. "0"',
    ], [], id='env_hash_random'),
    pytest.param(seed(vllm_env_extra={"PYTHONHASHSEED": "4294967296"}), [
        'p0, p1: PYTHONHASHSEED (vllm_env_common + vllm_prefill_env + vllm_env_extra, set in vllm_env_extra) is '
        "'4294967296': Python accepts 'random' or an integer 0..4294967295 and the pool needs one fixed value: set "
        'a quoted integer, e.g. "0"',
        'd0, d1: PYTHONHASHSEED (vllm_env_common + vllm_decode_env + vllm_env_extra, set in vllm_env_extra) is '
        "'4294967296': Python accepts 'random' or an integer 0..4294967295 and the pool needs one fixed value: set "
        'a quoted integer, e.g. "0"',
    ], [], id='env_hash_big'),
    pytest.param(seed(vllm_env_extra={"PYTHONHASHSEED": "4294967295"}), [], [], id='env_hash_max'),
    pytest.param(seed(vllm_env_extra={"HCCL_IF_IP": "10.0.0.1", "GLOO_SOCKET_IFNAME": "${nic_name}"}), [], [
        "p0, p1, d0, d1: HCCL_IF_IP (set in vllm_env_extra) is '10.0.0.1': it replaces the derived $local_ip (the "
        "node's business IP), which the topology keeps right per node and rank: remove it from vllm_env_extra "
        'unless this is intended',
    ], id='env_derived'),
    pytest.param(seed(vllm_env_common={"PYTHONHASHSEED": "0"}), [
        'p0, p1: DS_WORKER_ADDR (vllm_env_common + vllm_prefill_env + vllm_env_extra) is not set: the yuanrong '
        "pool backend reads this node's worker address from it and stops without it: set DS_WORKER_ADDR: "
        '$ds_worker_addr in vllm_env_common',
        'd0, d1: DS_WORKER_ADDR (vllm_env_common + vllm_decode_env + vllm_env_extra) is not set: the yuanrong pool '
        "backend reads this node's worker address from it and stops without it: set DS_WORKER_ADDR: "
        '$ds_worker_addr in vllm_env_common',
    ], DERIVED_ENV_MISSING, id='env_derived_missing'),
    pytest.param(seed(vllm_env_common={"PYTHONHASHSEED": "0"}, vllm_kv_pool_backend="mooncake"), [],
                 DERIVED_ENV_MISSING, id='env_derived_missing_mc'),
    pytest.param(seed(vllm_prefill_serve_args={"--max-num-seqs": 8, "bad flag": 1, "port": 1,
                                               "data_parallel_size": 2}), [
        "p0, p1: vllm_prefill_serve_args is {'--max-num-seqs': 8}: the role adds the dashes itself (this becomes "
        '----max-num-seqs): set the flag as max-num-seqs',
        "p0, p1: vllm_prefill_serve_args is {'bad flag': 1}: 'bad flag' is not a vllm serve flag name: set the "
        'long flag without dashes, e.g. max-model-len',
        "p0, p1: vllm_prefill_serve_args is {'port': 1}: run_dp_template.sh sets --port itself (from "
        'launch_online_dp.py and the topology), a second one conflicts: remove it and set the inventory variable '
        'instead (vllm_api_port, vllm_dp_*, vllm_<side>_tp_size, a3_listen_address, vllm_model_path, '
        'vllm_<side>_kv_port)',
        "p0, p1: vllm_prefill_serve_args is {'data_parallel_size': 2}: run_dp_template.sh sets "
        '--data_parallel_size itself (from launch_online_dp.py and the topology), a second one conflicts: remove '
        'it and set the inventory variable instead (vllm_api_port, vllm_dp_*, vllm_<side>_tp_size, '
        'a3_listen_address, vllm_model_path, vllm_<side>_kv_port)',
    ], [], id='serve_dashes'),
    pytest.param(seed(vllm_decode_serve_args={"max-model-len": 0, "max-num-seqs": "x", "seed": -1,
                                              "gpu-memory-utilization": 1.5, "enforce-eager": "true",
                                              "speculative-config": {"num_speculative_tokens": 0}, "hf-overrides": "x",
                                              "compilation-config": "y"}), [
        "d0, d1: vllm_decode_serve_args is {'compilation-config': 'y'}: vLLM reads --compilation-config as JSON: "
        'set a mapping, e.g. compilation-config: {key: value}',
        "d0, d1: vllm_decode_serve_args is {'enforce-eager': 'true'}: vllm serve takes --enforce-eager without a "
        'value (a value after it is an argument vLLM does not know): set true (the bare flag) or false (left out), '
        'unquoted',
        "d0, d1: vllm_decode_serve_args is {'gpu-memory-utilization': 1.5}: set the fraction of NPU memory vLLM "
        'may use, above 0 and at most 1 (e.g. 0.9)',
        "d0, d1: vllm_decode_serve_args is {'hf-overrides': 'x'}: vLLM reads --hf-overrides as JSON: set a "
        'mapping, e.g. hf-overrides: {key: value}',
        "d0, d1: vllm_decode_serve_args is {'max-model-len': 0}: set a positive token count (e.g. 202752, 128k), "
        'or -1/auto',
        "d0, d1: vllm_decode_serve_args is {'max-num-seqs': 'x'}: set a positive integer",
        "d0, d1: vllm_decode_serve_args is {'seed': -1}: set an integer >= 0",
        "d0, d1: vllm_decode_serve_args is {'speculative-config': {'num_speculative_tokens': 0}}: "
        'num_speculative_tokens must be a positive integer: set e.g. {num_speculative_tokens: 3, method: '
        'deepseek_mtp}',
    ], [], id='serve_values'),
    pytest.param(seed(vllm_prefill_serve_args={"served-model-name": "glm"}), [
        "p0, p1: vllm_prefill_serve_args is {'served-model-name': 'glm'}: vllm_served_model_name is 'glm-5.1', "
        'which the gate, the canary and the proxy\'s clients send: set served-model-name: "{{ '
        'vllm_served_model_name }}"',
    ], [], id='serve_name'),
    pytest.param(_on("d1", proxy_port=8090, etcd_tls=True), [
        'p0, p1, d0, d1: etcd_tls differs between the hosts (p0=False, p1=False, d0=False, d1=True): every worker '
        'and the proxy talk to the one etcd, which either takes TLS with client certificates or plain HTTP; set '
        'one value for every host (group_vars/all)',
        'p0, p1, d0, d1: proxy_port differs between the hosts (p0=8088, p1=8088, d0=8088, d1=8090): the proxy '
        "listens on the proxy host's value, while status.yml, the benchmark and the gate reach it with the value "
        'of the host they run on; set one value for every host (group_vars/all)',
    ], [], id='placement_one'),
    pytest.param(seed(vllm_bind_host="::1", etcd_listen_address="1.2.3.4"), [
        "p0, p1, d0, d1: vllm_bind_host is '::1': the roles reach every service on the node's business IP "
        "(a3_business_ip), which this address does not cover: set 0.0.0.0 or the node's business IP",
        "p0, p1, d0, d1: etcd_listen_address is '1.2.3.4': the roles reach every service on the node's business IP "
        "(a3_business_ip), which this address does not cover: set 0.0.0.0 or the node's business IP",
    ], [], id='listen_vllm'),
    pytest.param(seed(a3_etcd_host="zz", a3_proxy_host="p1"), [
        "all: a3_etcd_host is 'zz', which is not a host of the prefill or decode group: set it to one of p0, p1, "
        'd0, d1 or leave it empty (first prefill host)',
    ], [
        "listeners that take requests without credentials: the proxy's public port (set proxy_api_keys); the "
        "engines' /v1 routes (set vllm_api_key); etcd on zz (set etcd_tls: true). That is the seed's "
        "configuration; README 'Security' says how to turn each protection on",
    ], id='svc_host'),
    pytest.param(seed(a3_etcd_hosts=["p0", "zz", "d0", "d0"], a3_etcd_host="p1"), [
        "p0: a3_etcd_hosts is ['p0', 'zz', 'd0', 'd0'] and a3_etcd_host is 'p1': the hosts are named in one place, "
        "so set a3_etcd_hosts alone (its first host plays a3_etcd_host's part) and leave a3_etcd_host empty",
        "p0: a3_etcd_hosts names d0 more than once: an etcd member runs once per host, list each host once",
        "p0: a3_etcd_hosts names 'zz', which is not a host of the prefill or decode group: set hosts of p0, p1, d0, d1",
    ], [
        "listeners that take requests without credentials: the proxy's public port (set proxy_api_keys); the "
        "engines' /v1 routes (set vllm_api_key); etcd on p0, zz, d0 (set etcd_tls: true). That is the seed's "
        "configuration; README 'Security' says how to turn each protection on",
    ], id='etcd_members'),
    pytest.param(seed(a3_etcd_hosts=["p0", "d1"]), [], [
        "p0: a3_etcd_hosts has 2 members: etcd needs a majority (2) to serve, so 2 members survive no more losses "
        "than 1 do and fail more often; list 1 or 3 hosts",
        "listeners that take requests without credentials: the proxy's public port (set proxy_api_keys); the "
        "engines' /v1 routes (set vllm_api_key); etcd on p0, d1 (set etcd_tls: true). That is the seed's "
        "configuration; README 'Security' says how to turn each protection on",
    ], id='etcd_even'),
    pytest.param(seed(a3_etcd_hosts=["p0", "p1", "d0"]), [], [
        "listeners that take requests without credentials: the proxy's public port (set proxy_api_keys); the "
        "engines' /v1 routes (set vllm_api_key); etcd on p0, p1, d0 (set etcd_tls: true). That is the seed's "
        "configuration; README 'Security' says how to turn each protection on",
    ], id='etcd_cluster'),
    pytest.param(seed(a3_proxy_hosts=["d1", "zz", "d1"], a3_proxy_host="p1"), [
        "p0: a3_proxy_hosts is ['d1', 'zz', 'd1'] and a3_proxy_host is 'p1': the hosts are named in one place, "
        "so set a3_proxy_hosts alone (its first host plays a3_proxy_host's part) and leave a3_proxy_host empty",
        "p0: a3_proxy_hosts names d1 more than once: a proxy runs once per host, list each host once",
        "p0: a3_proxy_hosts names 'zz', which is not a host of the prefill or decode group: set hosts of p0, p1, d0, d1",
    ], [], id='proxy_hosts'),
    pytest.param(seed(a3_proxy_hosts=["d1", "p1", "d1", "p1"]), [
        "p0: a3_proxy_hosts names d1, p1 more than once: a proxy runs once per host, list each host once",
    ], [
        "p1: proxy_admin_bind_host is '127.0.0.1': the Prometheus on d1 scrapes this proxy's /metrics on its admin "
        "listener, which then is that host's own loopback: set proxy_admin_bind_host to p1's business IP (with "
        "proxy_admin_token), or list p1 in monitoring_hosts",
    ], id='proxy_hosts_twice'),
    pytest.param(seed(a3_proxy_hosts=["d1"]), [], [
        "p0: a3_proxy_hosts names one host (d1): one proxy is a3_proxy_host's setting; list two or more hosts for a "
        "proxy that survives the loss of one",
    ], id='proxy_one'),
    pytest.param(seed(a3_proxy_hosts=["p0", "p1", "d0"]), [], [
        "p1: proxy_admin_bind_host is '127.0.0.1': the Prometheus on p0 scrapes this proxy's /metrics on its admin "
        "listener, which then is that host's own loopback: set proxy_admin_bind_host to p1's business IP (with "
        "proxy_admin_token), or list p1 in monitoring_hosts",
        "d0: proxy_admin_bind_host is '127.0.0.1': the Prometheus on p0 scrapes this proxy's /metrics on its admin "
        "listener, which then is that host's own loopback: set proxy_admin_bind_host to d0's business IP (with "
        "proxy_admin_token), or list d0 in monitoring_hosts",
    ], id='proxy_scrape'),
    pytest.param(seed(a3_proxy_hosts=["p0", "p1"], monitoring_hosts=["p0", "p1"]), [], [], id='proxy_scraped'),
    pytest.param(seed(proxy_vip="192.0.2.100"), [
        "p0: proxy_vip is '192.0.2.100': a virtual IP moves between proxies: set a3_proxy_hosts to two or more hosts",
    ], [], id='vip_one_proxy'),
    pytest.param(seed(a3_proxy_hosts=["p0", "p1"], monitoring_hosts=["p0", "p1"], proxy_vip="192.0.2.12",
                      proxy_vip_prefix=33, proxy_vrrp_router_id=256, proxy_vrrp_password="nine-char"), [
        "p0, p1: proxy_vip is '192.0.2.12': it is the business IP (a3_business_ip) of p1: set a free address of the "
        "business network, held by no host",
        "p0, p1: proxy_vip_prefix is 33: set a prefix length from 1 to 32",
        "p0, p1: proxy_vrrp_router_id is 256: VRRP takes 1 to 255: set an id no other VRRP group of the network uses",
        "p0, p1: proxy_vrrp_password has 9 characters: VRRP PASS authentication carries 8 (keepalived cuts the rest "
        "off): set at most 8",
    ], [], id='vip_values'),
    pytest.param(_vip("vip.example"), [
        "p0, p1: proxy_vip is 'vip.example': set a free IP address of the business network, e.g. 10.0.0.100",
    ], [], id='vip_not_an_ip'),
    pytest.param(_vip("192.0.2.100", proxy_bind_host="192.0.2.11"), [
        "p0: proxy_bind_host is '192.0.2.11': the proxy would not take the requests sent to proxy_vip 192.0.2.100: "
        "set 0.0.0.0 (every address)",
    ], [], id='vip_bind'),
    pytest.param(_vip("192.0.2.100"), [], [], id='vip_ok'),
    pytest.param(seed(a3_ha=True), [
        "p0: a3_ha is true and proxy_vip is not set: clients reach the proxies on a virtual IP that moves when a proxy "
        "host is lost: set proxy_vip to a free address of the business network",
    ], [
        "p0: a3_ha is true and the prefill side runs 1 DP group(s) over 2 hosts: losing one node stops its whole "
        "group; set vllm_prefill_dp_groups: 2 (one group per node)",
        "p0: a3_ha is true and the decode side runs 1 DP group(s) over 2 hosts: losing one node stops its whole "
        "group; set vllm_decode_dp_groups: 2 (one group per node)",
        "p1: proxy_admin_bind_host is '127.0.0.1': the Prometheus on p0 scrapes this proxy's /metrics on its admin "
        "listener, which then is that host's own loopback: set proxy_admin_bind_host to p1's business IP (with "
        "proxy_admin_token), or list p1 in monitoring_hosts",
        "listeners that take requests without credentials: the proxy's public port (set proxy_api_keys); the "
        "engines' /v1 routes (set vllm_api_key); etcd on p0, p1, d0 (set etcd_tls: true). That is the seed's "
        "configuration; README 'Security' says how to turn each protection on",
    ], id='ha_needs_vip'),
    pytest.param(seed(a3_ha=True, proxy_vip="192.0.2.100", vllm_prefill_dp_groups=2, vllm_decode_dp_groups=2,
                      monitoring_hosts=["p0", "p1"], etcd_tls=True), [], [
        "listeners that take requests without credentials: the proxy's public port (set proxy_api_keys); the "
        "engines' /v1 routes (set vllm_api_key). That is the seed's configuration; README 'Security' says how to "
        "turn each protection on",
        "p1: Mooncake kv ports 30016-30031 of dp rank 0 lie inside Mooncake's random port band [20000, 36000) "
        "(AscendDirectTransport binds random ports there, 1000 per NPU): a collision shows as 'zmq.error.ZMQError: "
        "Address already in use' (vllm-ascend #8938). The seed chose these values; move vllm_prefill_kv_port to "
        "36000 or above if it happens",
        "d1: Mooncake kv ports 30116-30131 of dp rank 0 lie inside Mooncake's random port band [20000, 36000) "
        "(AscendDirectTransport binds random ports there, 1000 per NPU): a collision shows as 'zmq.error.ZMQError: "
        "Address already in use' (vllm-ascend #8938). The seed chose these values; move vllm_decode_kv_port to "
        "36000 or above if it happens",
    ], id='ha_ok'),
    pytest.param(_on("p1", a3_nic_name=""), [
        'p1: a3_nic_name is not set: set it to the business NIC name (e.g. enp3s0, bond0)',
    ], [], id='nic_missing'),
    pytest.param(_on("p1", a3_nic_name="<nic>"), [
        "p1: a3_nic_name is still the placeholder '<nic>': set it to the business NIC name (e.g. enp3s0, bond0)",
    ], [], id='nic_placeholder'),
    pytest.param(_on("p1", a3_business_ip=None), [
        "p1: a3_business_ip is not set: set it to the node's business IP",
    ], [], id='ip_missing'),
    pytest.param(_on("p1", a3_business_ip="<P1_IP>"), [
        "p1: a3_business_ip is still the placeholder '<P1_IP>': set it to the node's business IP",
    ], [], id='ip_placeholder'),
    pytest.param(_on("p1", a3_business_ip="1.2.3"), [
        "p1: a3_business_ip '1.2.3' is not a valid IP address: set the node's business IP, e.g. 10.0.0.11",
    ], [], id='ip_bad'),
    pytest.param(_on("p1", a3_business_ip="192.0.2.11"), [
        'p0, p1: a3_business_ip 192.0.2.11 is used by 2 hosts: every node needs its own business IP',
    ], [], id='ip_dup'),
    pytest.param(_on("d1", vllm_dp_address="x.y"), [
        "d1: vllm_dp_address 'x.y' is not a valid IP address: remove it (the group's first host is used) or set an "
        'address of that host',
    ], [
        "d1: vllm_dp_address x.y is not the decode group's first host (192.0.2.13): the DP group only forms when "
        "every member points at rank 0's address (seed FAQ: DP 组无法建立连接)",
    ], id='dp_address'),
    pytest.param(_on("d1", vllm_dp_address="192.0.2.99"), [], [
        "d1: vllm_dp_address 192.0.2.99 is not the decode group's first host (192.0.2.13): the DP group only forms "
        "when every member points at rank 0's address (seed FAQ: DP 组无法建立连接)",
    ], id='dp_address_other'),
    pytest.param(_on("d0", a3_npus_per_node=0, vllm_api_port=70000, vllm_decode_lookup_rpc_port="x",
                     vllm_decode_dp_groups=0, vllm_decode_dp_size_local="a"), [
        'd0: a3_npus_per_node is 0: set a positive integer',
        'd0: vllm_api_port 70000 is above 65535: set a valid TCP port',
        "d0: vllm_decode_dp_size_local is 'a': set a positive integer (engine instances per decode node) or leave "
        'it unset for vllm_dp_size_local',
        'd0: vllm_decode_dp_groups is 0: set a positive integer (independent DP groups the decode hosts are split '
        "into; 1 = the seed's one group per side)",
        "d0: vllm_decode_lookup_rpc_port is 'x': set an integer or 'dp_rank'",
    ], [], id='ints'),
    pytest.param(_on("d1", vllm_decode_tp_size=8), [
        'd0, d1: vllm_decode_tp_size differs between the decode hosts (d0=16, d1=8): set one value for the group '
        '(group_vars)',
    ], [], id='side_values'),
    pytest.param(seed(vllm_decode_dp_groups=3), [
        'd0: vllm_decode_dp_groups is 3 but the decode group has 2 hosts (d0, d1): the hosts must divide evenly '
        'into groups of the same size (consecutive hosts in inventory order form a group); set '
        'vllm_decode_dp_groups to one of 1, 2, or add/remove decode hosts',
    ], [], id='groups_divide'),
    pytest.param(seed(vllm_prefill_tp_size=8, vllm_prefill_kv_port=36000, vllm_decode_kv_port=36100), [
        'prefill/decode: vllm_prefill_tp_size 8 is lower than vllm_decode_tp_size 16: the Mooncake connector '
        'requires prefill tp >= decode tp; raise vllm_prefill_tp_size or lower vllm_decode_tp_size',
    ], [], id='tp_order'),
    pytest.param(seed(vllm_api_port=65535, vllm_dp_size_local=2, vllm_prefill_tp_size=8, vllm_decode_tp_size=8,
                      vllm_prefill_lookup_rpc_port="dp_rank", vllm_decode_lookup_rpc_port="dp_rank",
                      vllm_prefill_kv_port=36000, vllm_decode_kv_port=36100), [
        'p0, d0: vllm_api_port is 65535: dp rank 1 listens on 65536, above 65535: set vllm_api_port to at most 65534',
        'p1, d1: vllm_api_port is 65535: dp rank 3 listens on 65536, above 65535: set vllm_api_port to at most 65534',
    ], [], id='ports_end'),
    pytest.param(seed(vllm_decode_kv_port=65530), [
        "d0: vllm_decode_kv_port is 65530: dp rank 0's Mooncake ports end at 65545, above 65535: set "
        'vllm_decode_kv_port to at most 65504',
        "d1: vllm_decode_kv_port is 65530: dp rank 1's Mooncake ports end at 65561, above 65535: set "
        'vllm_decode_kv_port to at most 65504',
    ], [], id='kv_end'),
    pytest.param(seed(etcd_client_port=6700), [
        'p0: vllm API port of dp rank 0 (vllm_api_port) [6700-6700] is the same port as etcd client port '
        '(etcd_client_port) [6700-6700]: move one of them',
    ], [], id='overlap'),
    pytest.param(_args("vllm_decode_serve_args", **{"max-num-batched-tokens": 4}), [
        "d0, d1: vllm_serve_args_common + vllm_decode_serve_args is {'max-num-seqs': 8, 'max-num-batched-tokens': "
        "4}: vLLM refuses to start when max-num-batched-tokens is below max-num-seqs (vLLM v0.18.0: "
        "vllm/config/scheduler.py): set max-num-batched-tokens to at least 8 or max-num-seqs to at most 4",
    ], [], id="budget"),
    pytest.param(_args("vllm_decode_serve_args", **{"max-num-batched-tokens": 17}), [], [
        "d0, d1: vllm_serve_args_common + vllm_decode_serve_args is {'max-num-seqs': 8, 'max-num-batched-tokens': "
        "17, 'num_speculative_tokens': 3}: a full decode batch needs max-num-seqs x (1 + num_speculative_tokens) = "
        "32 tokens a step, but the step budget is max-num-batched-tokens, so only 4 requests get all their tokens a "
        "step and the decode graphs stop at 17 (vLLM v0.18.0: vllm/v1/core/sched/scheduler.py token budget, "
        "vllm/config/vllm.py graph sizes; vllm-ascend#8240): set max-num-batched-tokens to 32 (seed: 8 x (1 + 3) = "
        "32) or lower max-num-seqs to 4",
    ], id="budget_spec"),
]


@pytest.mark.parametrize("inv,errors,warnings", CASES)
def test_every_message_of_a_broken_inventory(inv, errors, warnings):
    got_errors, got_warnings = V.validate(inv)
    assert got_errors == errors
    assert [w for w in got_warnings if w not in SEED_WARNINGS] == warnings


def _specs_with(name, spec):
    """The collection's specs with one option declared anew."""
    specs = S.load()
    specs[name] = S.Option(name, "common", "validate", spec)
    return specs


def test_a_layout_integer_names_its_declared_minimum():
    specs = _specs_with("vllm_api_port", {"type": "int", "description": "At least 1024. At most 65535."})
    errors = V.validate(seed(vllm_api_port=80), specs=specs)[0]
    assert errors == ["p0, p1, d0, d1: vllm_api_port is 80: set an integer >= 1024"]
    assert V.validate(seed(vllm_api_port=1024), specs=specs)[0] == []
    unbounded = _specs_with("vllm_api_port", {"type": "int"})
    errors = V.validate(seed(vllm_api_port=0), specs=unbounded)[0]
    assert errors == ["p0, p1, d0, d1: vllm_api_port is 0: set a positive integer"]


@pytest.mark.parametrize("values,warnings", [
    # the seed's wheel is openyuanrong_datasystem-0.7.6rc1-...: a dot or a dash before rc is the same version for
    # pip, but the role compares the installed version's text (0.7.6rc1) with this one
    (dict(yuanrong_package_version="0.7.6.rc1"), [
        "p0, p1, d0, d1: yuanrong_package_version is '0.7.6.rc1': pip reads it as version 0.7.6rc1, and the installed "
        "package reports that text, which the role compares with this one: it would reinstall on every run; set "
        "0.7.6rc1"]),
    (dict(yuanrong_package_version="0.7.6-RC1"), [
        "p0, p1, d0, d1: yuanrong_package_version is '0.7.6-RC1': pip reads it as version 0.7.6rc1, and the installed "
        "package reports that text, which the role compares with this one: it would reinstall on every run; set "
        "0.7.6rc1"]),
    # not a PEP 440 version: no spelling of the wheel's (pip refuses it with the index; the wheel's version differs)
    (dict(yuanrong_package_version="latest"), [
        "p0, p1, d0, d1: yuanrong_wheel_url is 'https://gitcode.com/openeuler/yuanrong-datasystem/releases/download/"
        "v0.7.6.rc1/openyuanrong_datasystem-0.7.6rc1-cp311-cp311-manylinux_2_35_aarch64.whl': the wheel is version "
        "0.7.6rc1 but yuanrong_package_version is latest: the role compares the installed version with the latter and "
        "reinstalls on every run; set them to the same version"]),
    (dict(yuanrong_install_from="index", yuanrong_package_version="0.8.0"), []),
    (dict(yuanrong_install_from="index", yuanrong_package_version="v0.8.0-1"), [
        "p0, p1, d0, d1: yuanrong_package_version is 'v0.8.0-1': pip reads it as version 0.8.0.post1, and the "
        "installed package reports that text, which the role compares with this one: it would reinstall on every "
        "run; set 0.8.0.post1"]),
    (dict(yuanrong_package_version="0.7.6"), [
        "p0, p1, d0, d1: yuanrong_wheel_url is 'https://gitcode.com/openeuler/yuanrong-datasystem/releases/download/"
        "v0.7.6.rc1/openyuanrong_datasystem-0.7.6rc1-cp311-cp311-manylinux_2_35_aarch64.whl': the wheel is version "
        "0.7.6rc1 but yuanrong_package_version is 0.7.6: the role compares the installed version with the latter and "
        "reinstalls on every run; set them to the same version"]),
    # a wheel name without the five dash-separated fields names no version
    (dict(yuanrong_wheel_url="https://example.invalid/x-1/datasystem-0.7.5.whl"), []),
    (dict(yuanrong_install_from="file", yuanrong_wheel_src="openyuanrong_datasystem-0.8.1-cp311-cp311-linux.whl"), [
        "p0, p1, d0, d1: yuanrong_wheel_src is 'openyuanrong_datasystem-0.8.1-cp311-cp311-linux.whl': the wheel is "
        "version 0.8.1 but yuanrong_package_version is 0.7.6rc1: the role compares the installed version with the "
        "latter and reinstalls on every run; set them to the same version"]),
    (dict(yuanrong_install_from="file", yuanrong_wheel_src="/a-b-c-d-e/openyuanrong_datasystem-0.7.6rc1-x-y-z.whl"),
     []),
])
def test_the_wheels_version_against_the_package_version(values, warnings):
    errors, got = V.validate(seed(**values))
    assert errors == [] and [w for w in got if w not in SEED_WARNINGS] == warnings


def test_a_key_with_a_backslash_is_refused():
    errors, _unused = V.validate(seed(proxy_api_keys=["a\\b"], vllm_api_key="k\\"))
    assert errors == ["p0: proxy_api_keys[0] contains white space, a quote or a backslash, which an HTTP header cannot "
                      "carry: set another value",
                      "p0: vllm_api_key contains white space, a quote or a backslash, which an HTTP header cannot "
                      "carry: set another value"]


@pytest.mark.parametrize("bind, loopback", [
    ("localhost", True), ("::1", True), ("127.0.0.2", True), ("0.0.0.0", False), ("192.0.2.12", False),
    ("p1.example", False),
])
def test_a_second_proxys_admin_listener_out_of_the_prometheus_hosts_reach(bind, loopback):
    inv = seed(a3_proxy_hosts=["p0", "p1"])
    inv["hosts"]["p1"]["proxy_admin_bind_host"] = bind
    _errors, warnings = V.validate(inv)
    said = [w for w in warnings if w.startswith("p1: proxy_admin_bind_host is %r: the Prometheus on p0" % bind)]
    assert len(said) == (1 if loopback else 0), warnings
