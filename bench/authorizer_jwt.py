"""The authorizer's cold start with and without a JWT: fresh processes import the handler (with
JWT_ISSUER set: keys-only containers pay just this), then check their first JWT (PyJWT with
cryptography and httpx imported, the JWKS fetched from a local peer, the first RS256
verification) and a second one (cached key).

    env -u PYTHONDONTWRITEBYTECODE .venv/bin/python bench/authorizer_jwt.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import importlib.util, json, sys, time
t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
app = importlib.util.module_from_spec(spec)
spec.loader.exec_module(app)
t1 = time.perf_counter()
app.jwts.authenticate(sys.argv[2])
t2 = time.perf_counter()
app.jwts.authenticate(sys.argv[2])
t3 = time.perf_counter()
print(json.dumps({"init": t1 - t0, "first JWT": t2 - t1, "second JWT": t3 - t2}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    body = json.dumps({"keys": [jwk | {"kid": "k1", "alg": "RS256"}]}).encode()

    class Jwks(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Jwks)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    issuer = f"http://127.0.0.1:{server.server_port}/pool"
    claims = {"iss": issuer, "aud": "client", "token_use": "id", "custom:tenant": "acme"}
    token = jwt.encode(
        claims | {"exp": int(time.time()) + 3600}, key, algorithm="RS256", headers={"kid": "k1"}
    )
    env = {
        **os.environ,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "TABLE_NAME": "bench",
        "JWT_ISSUER": issuer,
        "JWT_AUDIENCE": "client",
        "PYTHONDONTWRITEBYTECODE": "0",
    }
    app = str(ROOT / "functions" / "authorizer" / "app.py")
    samples = []
    for _ in range(runs + 1):  # the first warms the filesystem cache and bytecode
        out = subprocess.run(
            [sys.executable, "-c", CHILD, app, token],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        samples.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"the authorizer, median of {runs} fresh processes")
    for name in ("init", "first JWT", "second JWT"):
        took = statistics.median(s[name] for s in samples[1:])
        print(f"  {name:<12} {took * 1000:7.1f} ms")
    server.shutdown()


if __name__ == "__main__":
    main()
