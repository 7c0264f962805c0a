"""The API key check of vLLM 0.18's OpenAI server (vllm/entrypoints/openai/api_server.py build_app and
server_utils.py AuthenticationMiddleware), as behaviour:

- the keys are `--api-key` (one or more) or else the environment variable VLLM_API_KEY; empty ones are dropped,
  and without any key nothing is checked;
- only a path that starts with /v1 is checked (/health, /ping, /version and /metrics stay open); OPTIONS never;
- the request passes when its Authorization header is `<scheme> <token>` with the scheme `bearer` in any case and
  the token equal to one of the keys; else the answer is 401 with the JSON body {"error":"Unauthorized"}
  (compact, as Starlette's JSONResponse writes it), before any routing (so an unknown /v1 path or a wrong method
  is 401 too, not 404 or 405).
"""

import hashlib
import hmac

UNAUTHORIZED_BODY = b'{"error":"Unauthorized"}'


def api_tokens(cli_keys, env_key):
    """The keys the server accepts: --api-key's values, else VLLM_API_KEY's; empty ones dropped."""
    return [key for key in (cli_keys or [env_key]) if key]


def authorized(method, path, authorization, tokens):
    """Whether a request may pass: no keys, a path outside /v1, OPTIONS, or a bearer token among the keys."""
    if not tokens or method == "OPTIONS" or not path.split("?", 1)[0].startswith("/v1"):
        return True
    if not authorization:
        return False
    scheme, _unused, token = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    digest = hashlib.sha256(token.encode("utf-8")).digest()
    found = False
    for key in tokens:
        found |= hmac.compare_digest(digest, hashlib.sha256(key.encode("utf-8")).digest())
    return found
