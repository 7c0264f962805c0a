import os
import sys

from vllm_sim.cli import main

if __name__ == "__main__":
    code = main()
    # Exit without interpreter finalisation: a native openYuanrong client whose
    # worker died can block for seconds in its destructor. Everything of ours
    # (sockets, IPC file) is already cleaned up by serve.run().
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code if isinstance(code, int) else 0)
