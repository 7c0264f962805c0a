"""vLLM-style log lines on stdout, tracebacks on stderr.

Format (vLLM >= 0.10): ``(APIServer pid=123) INFO 11-29 19:40:00 [file.py:42] message``.
"""

import os
import sys
import threading
import time

_lock = threading.Lock()
_debug = os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper() == "DEBUG"


class Logger:
    def __init__(self, proc="APIServer"):
        self.proc = proc

    def _emit(self, level, where, msg, args):
        if args:
            try:
                msg = msg % args
            except (TypeError, ValueError):
                msg = msg + " " + repr(args)
        ts = time.strftime("%m-%d %H:%M:%S")
        line = f"({self.proc} pid={os.getpid()}) {level} {ts} [{where}] {msg}"
        with _lock:
            try:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
            except (OSError, ValueError):
                pass

    def info(self, where, msg, *args):
        self._emit("INFO", where, msg, args)

    def warning(self, where, msg, *args):
        self._emit("WARNING", where, msg, args)

    def error(self, where, msg, *args):
        self._emit("ERROR", where, msg, args)

    def debug(self, where, msg, *args):
        if _debug:
            self._emit("DEBUG", where, msg, args)


api_log = Logger("APIServer")
engine_log = Logger("EngineCore_DP0")


def set_dp_rank(rank):
    engine_log.proc = f"EngineCore_DP{rank}"


def raw(text, stream=None):
    """Write raw text (uvicorn access lines, tracebacks)."""
    stream = stream or sys.stdout
    with _lock:
        try:
            stream.write(text if text.endswith("\n") else text + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass


class SimFatal(Exception):
    """A startup failure reported like vLLM reports it, then exit(code)."""

    def __init__(self, exc_type, message, frames=None, code=1, log_line=None,
                 where="core.py:708", chained=None):
        super().__init__(f"{exc_type}: {message}")
        self.exc_type = exc_type
        self.message = message
        self.frames = frames or []
        self.code = code
        self.log_line = log_line
        self.where = where
        self.chained = chained or []

    def render(self):
        """Return the traceback text a real Python process would print."""
        parts = []
        for ctype, cmsg in self.chained:
            parts.append("Traceback (most recent call last):\n")
            parts.append(f"{ctype}: {cmsg}\n" if cmsg else f"{ctype}\n")
            parts.append("\nThe above exception was the direct cause of the following exception:\n\n")
        parts.append("Traceback (most recent call last):\n")
        for fname, lineno, func, code in self.frames:
            parts.append(f'  File "{fname}", line {lineno}, in {func}\n')
            if code:
                parts.append(f"    {code}\n")
        parts.append(f"{self.exc_type}: {self.message}\n" if self.message else f"{self.exc_type}\n")
        return "".join(parts)


def report_fatal(err):
    """Log like vLLM (ERROR on stdout), then the traceback on stderr."""
    engine_log.error(err.where, err.log_line or "EngineCore failed to start.")
    raw(err.render(), sys.stderr)
    # Also leave the final line on stdout so a log file that only captures
    # stdout still names the cause.
    last = f"{err.exc_type}: {err.message}" if err.message else err.exc_type
    engine_log.error(err.where, last.splitlines()[0] if last else err.exc_type)
