"""``vllm serve``: startup checks in vLLM's order, DP group, connectors, API."""

import errno
import json
import os
import signal
import socket
import sys
import threading
import time

from vllm_sim import __version__, hostenv, kvconfig, patchcheck
from vllm_sim.auth import api_tokens
from vllm_sim.dpgroup import DPGroup
from vllm_sim.faults import FaultFile
from vllm_sim.kvtransfer import MooncakePorts, PendingKV
from vllm_sim.logutil import SimFatal, api_log, engine_log, raw, report_fatal, set_dp_rank

PW_REL = patchcheck.POOL_WORKER_REL
SITE = "/usr/local/lib/python3.11/site-packages"


class _Shutdown(Exception):
    pass


class Context:
    pass


def _non_default(args, argv):
    flags = [a for a in argv if a.startswith("-")]
    shown = {}
    for k, v in sorted(vars(args).items()):
        if k in ("subcommand", "model_tag"):
            continue
        flag = "--" + k.replace("_", "-")
        if flag in flags or k == "model":
            shown[k] = v
    return shown


def _check_model(path):
    cfg_file = os.path.join(path, "config.json")
    if not os.path.isdir(path) or not os.path.isfile(cfg_file):
        raise SimFatal(
            "ValueError",
            f"Invalid repository ID or local directory specified: '{path}'.\n"
            "Please verify the following requirements:\n"
            "1. Provide a valid Hugging Face repository ID.\n"
            "2. Specify a local directory that contains a recognized configuration file.\n"
            "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
            "   - For Mistral models: ensure the presence of a 'params.json'.",
            frames=[(f"{SITE}/vllm/transformers_utils/config.py", 568, "get_config",
                     "raise ValueError(error_message) from e")],
            log_line="Failed to load the model configuration.", where="api_server.py:1810")
    try:
        with open(cfg_file, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise ValueError("config.json is not a JSON object")
    except (OSError, ValueError) as e:
        raise SimFatal("OSError", f"It looks like the config file at '{cfg_file}' is not a valid JSON file. ({e})",
                       log_line="Failed to load the model configuration.", where="api_server.py:1810")
    return data


def _check_devices(tp, dp_local):
    dev_dir = hostenv.env_path("A3SIM_DEV_DIR", "/dev")
    spec, present = hostenv.visible_devices(dev_dir)
    need = tp * dp_local
    if spec is None:
        ids = present
    else:
        ids = []
        for tok in [t.strip() for t in spec.split(",") if t.strip()]:
            if not tok.isdigit():
                raise SimFatal("RuntimeError", f"ASCEND_RT_VISIBLE_DEVICES={spec!r}: invalid device id {tok!r}",
                               log_line="EngineCore failed to start.")
            ids.append(int(tok))
        for d in ids:
            if d not in present:
                raise SimFatal(
                    "RuntimeError",
                    "InitializeDevice:torch_npu/csrc/core/npu/sys_ctrl/npu_sys_ctrl.cpp:251 NPU function error: "
                    "c10_npu::SetDevice(device_id_), error code is 107001\n"
                    "[ERROR] ERR00100 PTA call acl api failed\n"
                    "[Error]: Invalid device ID.\n"
                    "        Check whether the device ID is valid.\n"
                    f"EE1001: The argument is invalid.Reason: Set visible device failed, invalid device={d}, "
                    f"input visible devices:{spec} ({os.path.join(dev_dir, f'davinci{d}')} does not exist "
                    "in this container)",
                    frames=[(f"{SITE}/vllm_ascend/worker/worker.py", 231, "_init_device",
                             "torch.npu.set_device(device)")],
                    log_line="EngineCore failed to start.")
    if len(ids) < need:
        raise SimFatal(
            "RuntimeError",
            f"World size ({need}) is larger than the number of available NPUs ({len(ids)}) in this node "
            f"(ASCEND_RT_VISIBLE_DEVICES={spec if spec is not None else '<unset>'}, "
            f"device nodes present: {len(present)}).",
            frames=[(f"{SITE}/vllm/v1/executor/multiproc_executor.py", 97, "_init_executor",
                     "assert self.world_size <= device_count")],
            log_line="EngineCore failed to start.")
    return ids[:need]


def _match_ifaces(var, value, all_ifaces):
    """Interfaces selected by a *_SOCKET_IFNAME value (comma list; HCCL: '=' exact, '^' exclude, else prefix)."""
    chosen = []
    for item in [v.strip() for v in value.split(",") if v.strip()]:
        if item.startswith("^"):
            continue
        if var == "HCCL_SOCKET_IFNAME" and not item.startswith("="):
            chosen += [i for i in all_ifaces if i.startswith(item)]
        else:
            name = item.lstrip("=")
            if hostenv.interface_exists(name):
                chosen.append(name)
    return sorted(set(chosen))


def _check_nics():
    ip = os.environ.get("HCCL_IF_IP")
    all_ifaces = hostenv.list_interfaces()
    for var in ("GLOO_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME"):
        value = os.environ.get(var)
        if not value:
            continue
        chosen = _match_ifaces(var, value, all_ifaces)
        if not chosen:
            if var == "GLOO_SOCKET_IFNAME":
                raise SimFatal(
                    "RuntimeError",
                    "[enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:83] "
                    f"ifa != nullptr. Unable to find interface for: [{value}]",
                    frames=[(f"{SITE}/torch/distributed/distributed_c10d.py", 4854, "new_group",
                             "pg = _new_process_group_helper(")],
                    log_line=f"GLOO_SOCKET_IFNAME={value}: no such interface "
                             f"(available: {', '.join(all_ifaces)})")
            raise SimFatal(
                "RuntimeError",
                "create:torch_npu/csrc/distributed/ProcessGroupHCCL.cpp HCCL function error: "
                "HcclGetRootInfo(&hcclID), error code is 7\n"
                f"[ERROR] HCCL socket interface not found: HCCL_SOCKET_IFNAME={value} matches no interface "
                f"(available: {', '.join(all_ifaces)})",
                frames=[(f"{SITE}/vllm_ascend/distributed/device_communicators/pyhccl.py", 91, "__init__",
                         "self.unique_id = self.hccl.hcclGetUniqueId()")],
                log_line=f"HCCL_SOCKET_IFNAME={value}: no such interface")
        if ip:
            carried = {}
            for name in chosen:
                carried[name] = hostenv.interface_addresses(name)
            if not any(a.split("/")[0] == ip for addrs in carried.values() for a in addrs):
                shown = "; ".join(f"{n}: {', '.join(a) or 'no IPv4 address'}" for n, a in carried.items())
                if var == "GLOO_SOCKET_IFNAME":
                    raise SimFatal(
                        "RuntimeError",
                        f"[enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:123] "
                        f"Gloo interface [{value}] does not carry HCCL_IF_IP {ip} ({shown}); "
                        f"peers cannot reach this rank",
                        log_line=f"GLOO_SOCKET_IFNAME={value} does not carry HCCL_IF_IP={ip} ({shown})")
                raise SimFatal(
                    "RuntimeError",
                    "create:torch_npu/csrc/distributed/ProcessGroupHCCL.cpp HCCL function error: "
                    "HcclGetRootInfo(&hcclID), error code is 7\n"
                    f"[ERROR] HCCL_IF_IP[{ip}] is not configured on HCCL_SOCKET_IFNAME[{value}] ({shown})",
                    log_line=f"HCCL_SOCKET_IFNAME={value} does not carry HCCL_IF_IP={ip} ({shown})")


def _check_store_backend(store, src):
    """Mimic KVPoolWorker.__init__: backend_map lookup (bare AssertionError) and import."""
    pw = os.path.join(src, PW_REL)
    try:
        info = patchcheck.inspect_tree(src)
    except FileNotFoundError:
        raise SimFatal("ModuleNotFoundError",
                       "No module named 'vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_worker'"
                       f" (VLLM_ASCEND_SRC={src}: {pw} not found)")
    except SyntaxError as e:
        raise SimFatal("SyntaxError", str(e))
    entry = info["entries"].get(store.backend.lower())
    if entry is None:
        engine_log.debug("pool_worker.py:135", "backend_map keys in %s: %s", pw, sorted(info["entries"]))
        raise SimFatal("AssertionError", "", frames=[
            (f"{SITE}/vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/ascend_store_connector.py", 61,
             "__init__", "self.connector_worker = KVPoolWorker("),
            (pw, info["assert_line"], "__init__", "assert backend is not None")])
    ok, etype, msg = patchcheck.backend_class_available(src, entry)
    if not ok:
        raise SimFatal(etype, msg, frames=[(pw, info["assert_line"] + 4, "__init__",
                                            "backend_module = importlib.import_module(backend_path)")])
    return entry


def _make_store(store, src):
    _check_store_backend(store, src)
    b = store.backend.lower()
    bw = f"{SITE}/vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/backend"
    if b == "yuanrong":
        from vllm_sim.pool import YuanrongPool
        return YuanrongPool()
    if b == "mooncake":
        raise SimFatal("ImportError",
                       "Please install mooncake by following the instructions at "
                       "https://github.com/kvcache-ai/Mooncake/blob/main/doc/en/build.md "
                       "to run vLLM with MooncakeConnector.",
                       frames=[(f"{bw}/mooncake_backend.py", 27, "__init__", "raise ImportError(")],
                       chained=[("ModuleNotFoundError", "No module named 'mooncake'")])
    if b == "memcache":
        raise SimFatal("ImportError",
                       "Please install memcache by following the instructions at "
                       "https://gitee.com/ascend/memfabric_hybrid to run vLLM with MemcacheConnector.",
                       frames=[(f"{bw}/memcache_backend.py", 24, "__init__", "raise ImportError(")],
                       chained=[("ModuleNotFoundError", "No module named 'memcache_hybrid'")])
    raise SimFatal("RuntimeError", f"backend '{store.backend}' is registered in backend_map but not simulated")


class IpcLookupSocket:
    """The AscendStore lookup IPC endpoint /tmp/lookup_rpc_port_{port}_dp_rank{rank}."""

    def __init__(self, path):
        self.path = path
        self.sock = None

    def open(self):
        try:
            if os.path.exists(self.path) or os.path.islink(self.path):
                os.unlink(self.path)  # zmq ipc bind replaces a stale endpoint
        except OSError:
            pass
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(self.path)
        s.listen(16)
        self.sock = s
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                c, _unused = self.sock.accept()
            except OSError:
                return
            try:
                c.sendall(b'{"ok": true}\n')
                c.close()
            except OSError:
                pass

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            try:
                os.unlink(self.path)
            except OSError:
                pass
            self.sock = None


def run(args, argv):
    ctx = Context()
    ctx.pid = os.getpid()
    ctx.version = __version__
    ctx.start_time = time.time()  # an engine_hang fault hangs engines started before its "since"
    ctx.port = args.port
    ctx.faults = FaultFile()
    stop = threading.Event()
    phase = {"serving": False, "exit_code": 0}

    def on_signal(signum, _frame):
        stop.set()
        if not phase["serving"]:
            raise _Shutdown()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    dp_rank = args.data_parallel_rank if args.data_parallel_rank is not None else 0
    set_dp_rank(dp_rank)
    resources = []
    server = None
    try:
        api_log.info("api_server.py:1885", "vLLM API server version %s", __version__)
        api_log.info("utils.py:253", "non-default args: %s", _non_default(args, argv))

        host = args.host or "0.0.0.0"
        # --- API socket first (vLLM binds it before building the engine)
        from vllm_sim.api import ApiServer
        if not hostenv.is_local_address(host):
            raise SimFatal("OSError", "[Errno 99] Cannot assign requested address",
                           log_line=f"Cannot bind the API server to {host}:{args.port}: "
                                    f"{host} is not configured on any interface",
                           where="api_server.py:1902")
        try:
            server = ApiServer((host, args.port), ctx)
            server.bind_and_listen()
        except OSError as e:
            if server is not None:
                server.server_close()
                server = None
            text = {errno.EADDRINUSE: "[Errno 98] Address already in use",
                    errno.EADDRNOTAVAIL: "[Errno 99] Cannot assign requested address"}.get(e.errno, str(e))
            raise SimFatal("OSError", text, log_line=f"Cannot bind the API server to {host}:{args.port}",
                           where="api_server.py:1902")
        resources.append(server.server_close)

        # --- configuration (model, parallel, kv transfer)
        model_cfg = _check_model(args.model)
        ctx.model = args.model
        ctx.model_id = os.path.basename(os.path.normpath(args.model)) or args.model
        ctx.served_names = args.served_model_name or [args.model]
        derived = model_cfg.get("max_position_embeddings")
        if args.max_model_len and isinstance(derived, int) and args.max_model_len > derived \
                and os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") != "1":
            raise SimFatal(
                "ValueError",
                f"User-specified max_model_len ({args.max_model_len}) is greater than the derived "
                f"max_model_len (max_position_embeddings={derived} or model_max_length=None in model's "
                "config.json). To allow overriding this maximum, set the env var "
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
                log_line="Failed to create the engine configuration.", where="api_server.py:1810")
        ctx.max_model_len = args.max_model_len or (derived if isinstance(derived, int) else 32768)
        arch = (model_cfg.get("architectures") or ["GlmMoeDsaForCausalLM"])[0]
        api_log.info("model.py:547", "Resolved architecture: %s", arch)
        api_log.info("model.py:1510", "Using max model len %d", ctx.max_model_len)
        tp, dp = args.tensor_parallel_size, args.data_parallel_size
        if args.data_parallel_rank is not None and not 0 <= args.data_parallel_rank < dp:
            raise SimFatal("ValueError", f"data_parallel_rank ({args.data_parallel_rank}) must be in "
                                         f"[0, data_parallel_size ({dp}))")
        dp_local = args.data_parallel_size_local or (1 if args.data_parallel_rank is not None else dp)
        kv = kvconfig.parse(args.kv_transfer_config)
        ctx.kvcfg = kv
        kvconfig.check_parallel(kv, tp, dp)
        ctx.tp, ctx.dp_rank, ctx.dp_size = tp, dp_rank, dp
        ctx.max_num_seqs = args.max_num_seqs or 256
        ctx.prefix_caching = args.enable_prefix_caching
        ctx.disable_log_stats = args.disable_log_stats
        ctx.disable_access_log = args.disable_uvicorn_access_log
        ctx.log_requests = args.enable_log_requests
        ctx.api_tokens = api_tokens(args.api_key, os.environ.get("VLLM_API_KEY"))
        ctx.my_ip = hostenv.local_ip()
        ctx.hccn_ok = hostenv.hccn_conf_present()
        ctx.pending = PendingKV()
        ctx.pool = None
        ctx.engine_id = f"{kv.engine_id}_dp0" if kv.connector and dp > 1 else kv.engine_id
        ctx.side_channel_port = (kv.mooncake.kv_port + dp_rank * tp) if kv.mooncake else None
        if args.block_size not in (None, 128):
            api_log.info("utils.py:1190", "Block size is set to 128 if prefix cache or chunked prefill is enabled.")
        api_log.info("core.py:93", "Initializing a V1 LLM engine (v%s) with config: model='%s', "
                     "served_model_name=%s, tensor_parallel_size=%d, data_parallel_size=%d, "
                     "data_parallel_rank=%d, enable_expert_parallel=%s, quantization=%s, "
                     "max_model_len=%d, enable_prefix_caching=%s, kv_transfer_config=%s",
                     __version__, args.model, ctx.served_names[0], tp, dp, dp_rank,
                     args.enable_expert_parallel, args.quantization, ctx.max_model_len,
                     ctx.prefix_caching, json.dumps(args.kv_transfer_config) if args.kv_transfer_config else None)

        # --- DP group (vLLM forms it before creating workers)
        dp_addr = args.data_parallel_address or "127.0.0.1"
        dp_port = args.data_parallel_rpc_port or 29550
        group = DPGroup(dp_rank, dp if args.data_parallel_rank is not None else 1, dp_addr, dp_port,
                        ctx.my_ip, args.port, stop)
        resources.append(group.close)
        if group.size > 1 and dp_rank == 0:
            if not hostenv.is_local_address(dp_addr):
                raise SimFatal("OSError", "[Errno 99] Cannot assign requested address",
                               log_line=f"DP rank 0 cannot listen on --data-parallel-address {dp_addr}:{dp_port}: "
                                        f"{dp_addr} is not an address of this host")
            group.listen()
        load_s = float(os.environ.get("A3SIM_LOAD_DELAY_S", "0") or 0)
        group.form()
        if stop.is_set():
            raise _Shutdown()

        # --- worker init: devices, communicators, connectors
        devices = _check_devices(tp, dp_local)
        engine_log.info("worker.py:231", "Using NPU devices %s (ASCEND_RT_VISIBLE_DEVICES=%s)",
                        ",".join(map(str, devices)), os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "<unset>"))
        _check_nics()
        if load_s > 0:
            engine_log.info("default_loader.py:262", "Loading weights (simulated %.1fs)", load_s)
            end = time.monotonic() + load_s
            while time.monotonic() < end and not stop.is_set():
                time.sleep(0.05)
        engine_log.info("model_runner_v1.py:3188", "Loading model weights took 0.01 GB")
        if kv.mooncake:
            if not hostenv.is_local_address(ctx.my_ip):
                raise SimFatal("zmq.error.ZMQError",
                               f"Cannot assign requested address (addr='tcp://{ctx.my_ip}:{ctx.side_channel_port}')",
                               log_line="KV Cache sending/receiving thread failed to start.")
            ports = MooncakePorts(ctx.my_ip, ctx.side_channel_port, tp, ctx.engine_id, ctx.pending)
            ports.bind()
            resources.append(ports.close)
        if kv.store:
            src = os.environ.get("VLLM_ASCEND_SRC") or "/vllm-workspace/vllm-ascend"
            ctx.pool = _make_store(kv.store, src)
            base = os.environ.get("VLLM_RPC_BASE_PATH") or "/tmp"
            ipc = IpcLookupSocket(os.path.join(base, f"lookup_rpc_port_{kv.store.lookup_rpc_port}_dp_rank{dp_rank}"))
            ipc.open()
            resources.append(ipc.close)
            engine_log.info("pool_scheduler.py:384", "AscendStore lookup endpoint ipc://%s (backend=%s)",
                            ipc.path, kv.store.backend)
        if not ctx.hccn_ok:
            engine_log.debug("worker.py:240", "hccn.conf not found")

        from vllm_sim.engine import Engine
        ctx.engine = Engine(ctx)

        def on_loss(rank):
            engine_log.error("core.py:1044", "DP group member rank %d disconnected; the DP group is broken "
                             "(collectives cannot complete), shutting down engine", rank)
            raw(f"RuntimeError: DP group peer rank {rank} lost", sys.stderr)
            phase["exit_code"] = 1
            stop.set()

        def on_exec_timeout(holders, seq, waited):
            # HCCL's execution timeout in a collective the group never completed (a member stopped stepping):
            # the watchdog's line, the ACL error and EI0002, as a real rank reports it; then the engine dies
            ms = int(waited * 1000)
            limit = int(group.exec_timeout * 1000)
            stamp = time.strftime("%Y-%m-%d-%H:%M:%S")
            raw(f"[rank{dp_rank}]:[E{time.strftime('%m%d %H:%M:%S')} compiler_depend.ts:574] [Rank {dp_rank}] "
                f"Watchdog caught collective operation timeout: WorkHCCL(SeqNum={seq}, OpType=ALLREDUCE, "
                f"Timeout(ms)={limit}) ran for {ms} milliseconds before timing out.", sys.stderr)
            raw(f"[ERROR] {stamp} (PID:{ctx.pid}, Device:0, RankID:{dp_rank}) ERR00100 PTA call acl api failed",
                sys.stderr)
            raw(f"EI0002: [PID: {ctx.pid}] {stamp} The wait execution of the Notify register times out. Reason: The "
                f"Notify register has not received the Notify record from remote rank: [{holders}]. base "
                f"information: [streamID:[1], taskID[{seq}], taskType[Notify Wait], tag[AllReduce_dp_group]].\n"
                "        Possible Cause: 1. An exception occurs during the execution on some NPUs in the cluster. "
                "(default 1800s, You can set the interval by using HCCL_EXEC_TIMEOUT.)", sys.stderr)
            engine_log.error("core.py:933", "EngineCore encountered a fatal error: RuntimeError: npuSynchronizeDevice:"
                             "build/CMakeFiles/torch_npu.dir/compiler_depend.ts:479 NPU function error: "
                             "AclrtSynchronizeDeviceWithTimeout, error code is 507048 (a collective of the DP group "
                             "did not complete within HCCL_EXEC_TIMEOUT=%gs; waiting for rank %s)",
                             group.exec_timeout, holders)
            phase["exit_code"] = 1
            stop.set()

        group.on_loss = on_loss
        group.on_exec_timeout = on_exec_timeout
        ctx.group = group

        # --- serve
        phase["serving"] = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
        shown = host if host not in ("", "0.0.0.0") else "0.0.0.0"
        api_log.info("api_server.py:1945", "Starting vLLM API server %d on http://%s:%d", dp_rank, shown, args.port)
        api_log.info("launcher.py:38", "Available routes are:")
        for route, methods in (("/health", "GET"), ("/v1/models", "GET"), ("/version", "GET"),
                               ("/metrics", "GET"), ("/v1/completions", "POST"), ("/v1/chat/completions", "POST")):
            api_log.info("launcher.py:46", "Route: %s, Methods: %s", route, methods)
        raw(f"(APIServer pid={ctx.pid}) INFO:     Started server process [{ctx.pid}]")
        raw(f"(APIServer pid={ctx.pid}) INFO:     Waiting for application startup.")
        raw(f"(APIServer pid={ctx.pid}) INFO:     Application startup complete.")
        while not stop.wait(0.5):
            pass
        raw(f"(APIServer pid={ctx.pid}) INFO:     Shutting down")
        api_log.info("launcher.py:80", "Shutting down FastAPI HTTP server.")
        return phase["exit_code"]
    except SimFatal as err:
        report_fatal(err)
        return err.code
    except _Shutdown:
        api_log.info("launcher.py:80", "Received signal, shutting down before the server started.")
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if server is not None and phase["serving"]:
            try:
                server.shutdown()
            except Exception:  # noqa: BLE001
                pass
        for closer in reversed(resources):
            try:
                closer()
            except Exception:  # noqa: BLE001
                pass
