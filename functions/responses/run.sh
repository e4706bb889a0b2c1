#!/bin/bash
# Started by the Lambda Web Adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap); it proxies to $PORT.
exec python -m uvicorn app:app --host 127.0.0.1 --port "${PORT:-8080}" --no-access-log --timeout-keep-alive 300
