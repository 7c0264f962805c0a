"""Request processing: prefix cache, KV pool, Mooncake pulls, timing, stats."""

import hashlib
import math
import os
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from vllm_sim import kvtransfer
from vllm_sim.logutil import engine_log
from vllm_sim.prefix import BLOCK_SIZE, LocalPrefixCache, block_hashes, tokenize

TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
# Names, types, labels and buckets as vLLM 0.18's PrometheusStatLogger (vllm/v1/metrics/loggers.py) registers
# them; prometheus_client adds _total to a counter's name in the text format, HELP and TYPE lines included.
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0]
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
E2E_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
               120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
GARBAGE = ["ĠĠ", "!!", "锟斤拷", "\ufffd", "<unk>", "ÃÂ", "@@", "。。", "zz", "##", "ðŁ", "\u200b!"]


def _env_float(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


@dataclass
class GenRequest:
    kind: str                  # "chat" | "completion"
    request_id: str
    prompt_text: str
    user_text: str
    max_tokens: int = None
    stream: bool = False
    kv_params: dict = None
    arrival: float = field(default_factory=time.monotonic)


@dataclass
class Outcome:
    pieces: list = field(default_factory=list)
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    cached_tokens: int = 0
    kv_transfer_params: dict = None
    error: tuple = None        # (status, message, type)
    token_delay: float = 0.0
    ttft: float = 0.0
    queued: float = 0.0        # seconds from arrival until the request got a slot
    local_hit: int = 0
    ext_hit: int = 0


class Histogram:
    def __init__(self, buckets):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0
        self.sum = 0.0

    def observe(self, v):
        self.total += 1
        self.sum += v
        for i, b in enumerate(self.buckets):
            if v <= b:
                self.counts[i] += 1


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.ext_queries = 0
        self.ext_hits = 0
        self.prompt_tokens = 0
        self.gen_tokens = 0
        self.success = {}
        self.by_source = dict.fromkeys(PROMPT_SOURCES, 0)
        self.cached_tokens = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.tpot = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.queue = Histogram(E2E_BUCKETS)
        self.inference = Histogram(E2E_BUCKETS)
        self.prefill = Histogram(E2E_BUCKETS)
        self.decode = Histogram(E2E_BUCKETS)
        self.running = 0
        self.waiting = 0
        self.win_local = deque(maxlen=1000)
        self.win_ext = deque(maxlen=1000)
        self.last_log = time.monotonic()
        self.since_prompt = 0
        self.since_gen = 0


class Engine:
    def __init__(self, ctx):
        self.ctx = ctx
        self.stats = Stats()
        self.local = LocalPrefixCache(int(os.environ.get("A3SIM_LOCAL_CACHE_BLOCKS", "65536")))
        self.us_token = _env_float("A3SIM_US_PER_TOKEN", "200")
        self.us_cached = _env_float("A3SIM_US_PER_CACHED_TOKEN", "5")
        self.us_out = _env_float("A3SIM_US_PER_OUTPUT_TOKEN", "1000")
        self.slots = threading.Semaphore(max(1, ctx.max_num_seqs))
        self._block_id = 0
        self._bid_lock = threading.Lock()

    # ------------------------------------------------------------------ helpers
    def _next_block_ids(self, n):
        with self._bid_lock:
            start = self._block_id
            self._block_id += n
        return list(range(start, start + n))

    def _pool_key(self, h):
        return f"{self.ctx.model_id}@tp_rank:0@pcp0@dcp0@pp_rank:0@{h}"

    def answer_pieces(self, req, corrupt):
        if corrupt:
            seed = int(hashlib.sha256(req.prompt_text.encode("utf-8", "surrogatepass")).hexdigest(), 16)
            out = []
            for i in range(48):
                out.append(GARBAGE[(seed >> (i % 200)) % len(GARBAGE)] if i % 3 else "\ufffd")
            return out
        words = re.findall(r"\S+", req.user_text)[:12]
        echo = " ".join(words) if words else "(empty prompt)"
        # Model name and prompt words first, so even a small max_tokens keeps them.
        text = (f"[{self.ctx.served_names[0]}] {echo} | deterministic reply from the simulated "
                f"vLLM-Ascend engine on Ascend A3.")
        return tokenize(text)

    # ------------------------------------------------------------------ slots
    def acquire(self):
        with self.stats.lock:
            self.stats.waiting += 1
        self.slots.acquire()
        with self.stats.lock:
            self.stats.waiting -= 1
            self.stats.running += 1

    def release(self):
        with self.stats.lock:
            self.stats.running -= 1
        self.slots.release()

    # ------------------------------------------------------------------ main path
    def step(self):
        """One forward step of the DP group (lockstep, dpgroup.DPGroup.wait_live): raises GroupStalled when the
        group stopped stepping for longer than the execution timeout."""
        group = getattr(self.ctx, "group", None)
        if group is not None:
            group.wait_live()

    def prefill(self, req):
        """Runs the prefill (sleeping for its simulated cost); returns an Outcome."""
        ctx = self.ctx
        self.step()
        tokens = tokenize(req.prompt_text)
        n = len(tokens)
        out = Outcome(prompt_tokens=n, queued=time.monotonic() - req.arrival)
        if ctx.max_model_len and n + (req.max_tokens or 0) > ctx.max_model_len:
            where = "messages" if req.kind == "chat" else "prompt"
            out.error = (400, f"This model's maximum context length is {ctx.max_model_len} tokens. "
                              f"However, you requested {n + (req.max_tokens or 0)} tokens ({n} in the {where}, "
                              f"{req.max_tokens or 0} in the completion). Please reduce the length of the "
                              f"{where} or completion.", "BadRequestError")
            return out
        hashes = block_hashes(tokens, BLOCK_SIZE)
        full = len(hashes)
        digest = hashlib.sha256("".join(tokens).encode("utf-8", "surrogatepass")).hexdigest()[:32]
        params = req.kv_params if isinstance(req.kv_params, dict) else None
        corrupt = not ctx.hccn_ok

        # 1. local prefix cache (vLLM always recomputes the last token)
        local_blocks = 0
        if ctx.prefix_caching:
            local_blocks = self.local.match(hashes[:max(0, (n - 1) // BLOCK_SIZE)])
        local_hit = local_blocks * BLOCK_SIZE

        # 2. external: Mooncake pull (decode side) or KV pool (store connector)
        ext_hit = 0
        ext_source = None
        pool_exists = None
        kv = ctx.kvcfg
        mooncake_pull = bool(kv.mooncake and params and params.get("do_remote_prefill"))
        if mooncake_pull:
            try:
                reply = kvtransfer.pull_kv(params, digest, n)
                ext_hit = max(0, n - local_hit)
                ext_source = f"mooncake {params.get('remote_host')}:{params.get('remote_port')}"
                if reply.get("corrupt"):
                    corrupt = True
                if reply.get("digest") != digest:
                    engine_log.warning("mooncake_connector.py:1455",
                                       "KV pulled for request %s does not match the prompt "
                                       "(remote digest %s, local %s)", params.get("remote_request_id"),
                                       reply.get("digest"), digest)
                    corrupt = True
            except Exception as e:  # noqa: BLE001 - any transfer failure
                engine_log.error("mooncake_connector.py:441", "Failed to transfer KV cache for request %s: %s",
                                 params.get("remote_request_id"), e)
                if kv.load_failure_policy == "fail":
                    engine_log.error("scheduler.py:1377", "KV load failed for request %s; "
                                     "kv_load_failure_policy=fail, finishing it with an error",
                                     req.request_id)
                    with self.stats.lock:
                        self.stats.ext_queries += n
                        self.stats.win_ext.append((n, 0))
                    out.error = (500, "Internal server error: KV cache load from the prefill instance failed "
                                      f"({e})", "InternalServerError")
                    return out
                engine_log.warning("scheduler.py:1390", "KV load failed for request %s; "
                                   "kv_load_failure_policy=recompute, recomputing %d tokens locally",
                                   req.request_id, n - local_hit)
        elif kv.store and ctx.pool is not None and (kv.is_producer or kv.store.extra.get("consumer_is_to_load")):
            if n >= BLOCK_SIZE:
                keys = [self._pool_key(h) for h in hashes]
                pool_exists = ctx.pool.exists(keys)
                k = 0
                for e in pool_exists:
                    if not e:
                        break
                    k += 1
                pool_hit = k * BLOCK_SIZE
                if pool_hit == n:
                    pool_hit -= 1
                need = pool_hit - local_hit if pool_hit > local_hit else 0
                engine_log.info("pool_scheduler.py:95", "Reqid: %s, Total tokens %d, kvpool hit tokens: %d, "
                                "need to load: %d", req.request_id, n, pool_hit, need)
                if need > 0:
                    vals = ctx.pool.get(keys[local_blocks:k])
                    good = 0
                    for v in vals:
                        if v is None:
                            break
                        if isinstance(v, (bytes, bytearray)) and v.startswith(b"A3SIMKV1:bad"):
                            corrupt = True
                        good += 1
                    if good < len(vals):
                        ext_hit = max(0, (local_blocks + good) * BLOCK_SIZE - local_hit)
                    else:
                        ext_hit = need
                    ext_source = f"kvpool {ctx.pool.addr}"
        computed = n - local_hit - ext_hit
        delay = (computed * self.us_token + (local_hit + ext_hit) * self.us_cached) / 1e6
        if delay > 0:
            time.sleep(delay)

        # 3. save: new blocks into the pool, all blocks into the local cache
        if (kv.store and ctx.pool is not None and full
                and (kv.is_producer or kv.store.extra.get("consumer_is_to_put"))):
            keys = [self._pool_key(h) for h in hashes]
            if pool_exists is None:
                pool_exists = ctx.pool.exists(keys)
            new = [i for i, e in enumerate(pool_exists) if not e]
            if new:
                flag = b"A3SIMKV1:bad:" if corrupt else b"A3SIMKV1:ok:"
                stored = ctx.pool.put([keys[i] for i in new], [flag + hashes[i].encode() for i in new])
                if stored:
                    engine_log.debug("pool_worker.py:229", "Stored %d new blocks for request %s",
                                     stored, req.request_id)
        if ctx.prefix_caching and full:
            self.local.insert(hashes)

        engine_log.info("scheduler.py:612", "Request %s: num_prompt_tokens=%d, num_computed_tokens=%d "
                        "(local_cache_hit=%d, external_cache_hit=%d%s)", req.request_id, n,
                        local_hit + ext_hit, local_hit, ext_hit, f" from {ext_source}" if ext_source else "")

        # 4. stats
        with self.stats.lock:
            s = self.stats
            if ctx.prefix_caching:
                s.prefix_queries += n
                s.prefix_hits += local_hit
                s.win_local.append((n, local_hit))
            if kv.connector:
                s.ext_queries += n
                s.ext_hits += ext_hit
                s.win_ext.append((n, ext_hit))

        # 5. output
        pieces = self.answer_pieces(req, corrupt)
        limit = req.max_tokens
        if limit is not None and limit < len(pieces):
            out.pieces = pieces[:limit]
            out.finish_reason = "length"
        else:
            out.pieces = pieces
            out.finish_reason = "stop"
        out.cached_tokens = local_hit + ext_hit
        out.local_hit, out.ext_hit = local_hit, ext_hit
        out.token_delay = self.us_out / 1e6
        out.ttft = time.monotonic() - req.arrival + out.token_delay

        if kv.mooncake and params and params.get("do_remote_decode"):
            for rid in params.get("aborted_request") or []:
                if ctx.pending.free(rid):
                    engine_log.info("mooncake_connector.py:1040", "Freed KV of aborted request %s", rid)
            if out.finish_reason == "length":
                nblocks = math.ceil(n / BLOCK_SIZE)
                ctx.pending.add(req.request_id, {"num_tokens": n, "digest": digest, "corrupt": corrupt})
                engine_log.info("mooncake_connector.py:1057", "Delaying free of %d blocks for request %s",
                                nblocks, req.request_id)
                out.kv_transfer_params = {
                    "do_remote_prefill": True,
                    "do_remote_decode": False,
                    "remote_block_ids": self._next_block_ids(nblocks),
                    "remote_engine_id": ctx.engine_id,
                    "remote_request_id": req.request_id,
                    "remote_host": ctx.my_ip,
                    "remote_port": ctx.side_channel_port,
                    "remote_pcp_size": 1,
                    "remote_dcp_size": 1,
                    "remote_ptp_size": ctx.tp,
                    "last_token_id": int(digest[:6], 16),
                    "remote_multi_nodes_meta_mapping": {},
                    "num_prompt_blocks": nblocks,
                }
        return out

    def finish(self, req, out):
        now = time.monotonic()
        with self.stats.lock:
            s = self.stats
            if out.error is None:
                s.prompt_tokens += out.prompt_tokens
                s.gen_tokens += len(out.pieces)
                s.since_prompt += out.prompt_tokens
                s.since_gen += len(out.pieces)
                s.success[out.finish_reason] = s.success.get(out.finish_reason, 0) + 1
                s.cached_tokens += out.cached_tokens
                s.by_source["local_cache_hit"] += out.local_hit
                s.by_source["external_kv_transfer"] += out.ext_hit
                s.by_source["local_compute"] += max(0, out.prompt_tokens - out.local_hit - out.ext_hit)
                e2e = now - req.arrival
                decode = max(0.0, e2e - out.ttft)
                s.ttft.observe(out.ttft)
                s.e2e.observe(e2e)
                s.queue.observe(out.queued)
                s.inference.observe(max(0.0, e2e - out.queued))
                s.prefill.observe(max(0.0, out.ttft - out.queued))
                s.decode.observe(decode)
                for _unused in range(max(0, len(out.pieces) - 1)):
                    s.itl.observe(out.token_delay)
                if len(out.pieces) > 1:
                    s.tpot.observe(decode / (len(out.pieces) - 1))
        if not self.ctx.disable_log_stats:
            self.log_stats()

    def log_stats(self):
        with self.stats.lock:
            s = self.stats
            now = time.monotonic()
            dt = max(now - s.last_log, 1e-3)
            pt, gt = s.since_prompt / dt, s.since_gen / dt
            s.since_prompt = s.since_gen = 0
            s.last_log = now
            lq = sum(q for q, _h in s.win_local)
            lh = sum(h for _q, h in s.win_local)
            eq = sum(q for q, _h in s.win_ext)
            eh = sum(h for _q, h in s.win_ext)
            running, waiting = s.running, s.waiting
        parts = [f"Avg prompt throughput: {pt:.1f} tokens/s", f"Avg generation throughput: {gt:.1f} tokens/s",
                 f"Running: {running} reqs", f"Waiting: {waiting} reqs",
                 f"GPU KV cache usage: {100 * self.local.usage():.1f}%",
                 f"Prefix cache hit rate: {100.0 * lh / lq if lq else 0.0:.1f}%"]
        if self.ctx.kvcfg.connector:
            parts.append(f"External prefix cache hit rate: {100.0 * eh / eq if eq else 0.0:.1f}%")
        engine_log.info("loggers.py:257", "Engine %03d: %s", self.ctx.dp_rank, ", ".join(parts))

    # ------------------------------------------------------------------ metrics
    def prometheus(self):
        """/metrics as vLLM 0.18 serves it (prometheus_client text format 0.0.4): the PrometheusStatLogger
        names of vllm/v1/metrics/loggers.py with their types, labels (model_name, engine) and buckets, plus the
        process collector's process_start_time_seconds. Values follow the simulated load."""
        name = self.ctx.served_names[0]
        eng = str(self.ctx.dp_rank)
        lines = []

        def lab(**extra):
            pairs = dict(engine=eng, model_name=name, **extra)
            return "{" + ",".join(f'{k}="{pairs[k]}"' for k in sorted(pairs)) + "}"

        def head(mname, mtype, help_):
            lines.append(f"# HELP {mname} {help_}")
            lines.append(f"# TYPE {mname} {mtype}")

        def gauge(mname, help_, value):
            head(mname, "gauge", help_)
            lines.append(f"{mname}{lab()} {float(value)}")

        def counter(mname, help_, values):
            """values: a number, or {(label, value): number} for one extra label."""
            head(mname + "_total", "counter", help_)
            if isinstance(values, dict):
                for (key, val), v in values.items():
                    lines.append(f"{mname}_total{lab(**{key: val})} {float(v)}")
            else:
                lines.append(f"{mname}_total{lab()} {float(values)}")

        def hist(mname, help_, h):
            head(mname, "histogram", help_)
            for b, c in zip(h.buckets, h.counts):
                lines.append(f"{mname}_bucket{lab(le=float(b))} {float(c)}")
            lines.append(f"{mname}_bucket{lab(le='+Inf')} {float(h.total)}")
            lines.append(f"{mname}_count{lab()} {float(h.total)}")
            lines.append(f"{mname}_sum{lab()} {h.sum}")

        with self.stats.lock:
            s = self.stats
            head("process_start_time_seconds", "gauge",
                 "Start time of the process since unix epoch in seconds.")
            lines.append(f"process_start_time_seconds {float(int(self.ctx.start_time))}")
            gauge("vllm:num_requests_running", "Number of requests in model execution batches.", s.running)
            gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", s.waiting)
            head("vllm:engine_sleep_state", "gauge",
                 "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
                 "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.")
            for state, v in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
                lines.append(f"vllm:engine_sleep_state{lab(sleep_state=state)} {float(v)}")
            gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", self.local.usage())
            counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
                    s.prefix_queries)
            counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                    s.prefix_hits)
            counter("vllm:external_prefix_cache_queries",
                    "External prefix cache queries from KV connector cross-instance cache sharing, "
                    "in terms of number of queried tokens.", s.ext_queries)
            counter("vllm:external_prefix_cache_hits",
                    "External prefix cache hits from KV connector cross-instance cache sharing, "
                    "in terms of number of cached tokens.", s.ext_hits)
            counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", 0)
            counter("vllm:prompt_tokens", "Number of prefill tokens processed.", s.prompt_tokens)
            counter("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.",
                    {("source", src): s.by_source[src] for src in PROMPT_SOURCES})
            counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).",
                    s.cached_tokens)
            counter("vllm:generation_tokens", "Number of generation tokens processed.", s.gen_tokens)
            counter("vllm:request_success", "Count of successfully processed requests.",
                    {("finished_reason", r): s.success.get(r, 0) for r in FINISH_REASONS})
            hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", s.ttft)
            hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", s.itl)
            hist("vllm:request_time_per_output_token_seconds",
                 "Histogram of time_per_output_token_seconds per request.", s.tpot)
            hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", s.e2e)
            hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                 s.queue)
            hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
                 s.inference)
            hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
                 s.prefill)
            hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                 s.decode)
        return "\n".join(lines) + "\n"
