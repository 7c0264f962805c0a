"""Tokenisation, block hashing and the local prefix cache.

Tokens: each run of up to 4 non-space characters together with the
whitespace before it (so concatenating tokens gives back the text).
Block hashes are chained sha256 digests over 128-token blocks, seeded with
``hash()`` of a fixed string: Python randomises str hashes per process unless
PYTHONHASHSEED is set, exactly like vLLM's NONE_HASH, so two nodes only share
pool keys when they run with the same PYTHONHASHSEED.
"""

import hashlib
import re
import threading
from collections import OrderedDict

TOKEN_RE = re.compile(r"\s*\S{1,4}")
BLOCK_SIZE = 128


def tokenize(text):
    return TOKEN_RE.findall(text or "")


def none_hash():
    # Depends on PYTHONHASHSEED (random when unset or "random").
    return hash("vllm_sim:NONE_HASH:v1") & ((1 << 64) - 1)


def block_hashes(tokens, block_size=BLOCK_SIZE, seed=None):
    """Hashes of the full blocks of `tokens`, each chained over its parent."""
    parent = f"{none_hash() if seed is None else seed:016x}"
    out = []
    for i in range(len(tokens) // block_size):
        block = tokens[i * block_size:(i + 1) * block_size]
        h = hashlib.sha256()
        h.update(parent.encode())
        h.update(b"\x1e")
        h.update("\x1f".join(block).encode("utf-8", "surrogatepass"))
        parent = h.hexdigest()[:32]
        out.append(parent)
    return out


class LocalPrefixCache:
    """LRU set of block hashes (the instance's own NPU KV cache)."""

    def __init__(self, capacity_blocks):
        self.capacity = max(1, int(capacity_blocks))
        self._blocks = OrderedDict()
        self._lock = threading.Lock()

    def match(self, hashes):
        n = 0
        with self._lock:
            for h in hashes:
                if h not in self._blocks:
                    break
                self._blocks.move_to_end(h)
                n += 1
        return n

    def insert(self, hashes):
        with self._lock:
            for h in hashes:
                self._blocks[h] = True
                self._blocks.move_to_end(h)
            while len(self._blocks) > self.capacity:
                self._blocks.popitem(last=False)

    def usage(self):
        with self._lock:
            return len(self._blocks) / self.capacity
