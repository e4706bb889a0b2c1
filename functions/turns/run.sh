#!/bin/bash
# Started by the Lambda Web Adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap); it proxies to $PORT.
# The runtime puts the layer (/opt/python) on sys.path only in the interpreter it starts itself:
# this one finds it through PYTHONPATH, ahead of the runtime's own path, as in that interpreter.
# LAYER_PYTHON_DIR stands in for /opt/python where the layer lies elsewhere (the artifact test).
export PYTHONPATH="${LAYER_PYTHON_DIR:-/opt/python}${PYTHONPATH:+:$PYTHONPATH}"
exec python -m agents_core.web.serve app:app --host 127.0.0.1 --port "${AWS_LWA_PORT:-${PORT:-8080}}" --http httptools --loop uvloop --no-access-log --timeout-keep-alive 300
