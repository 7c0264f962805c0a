"""Simulated ``vllm`` engine for the A3 PD-disaggregation simulation.

Stands in for ``vllm serve`` (vLLM v0.18.0 + vLLM-Ascend v0.18.0) on machines
without Ascend NPUs. Standard library only at import time; the openYuanrong
SDK (``yr.datasystem``) is imported lazily when the yuanrong KV-pool backend
is configured. See ``sim/engine/README.md`` for the contract.
"""

__version__ = "0.18.0"
