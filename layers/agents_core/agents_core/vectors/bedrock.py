"""Amazon Titan Text Embeddings V2 on Bedrock, through InvokeModel.

Titan embeds one text a call (body `{"inputText", "dimensions", "normalize"}`, answer
`{"embedding", "inputTextTokenCount"}`), so a batch runs as at most `concurrency` calls at
once on one botocore client (thread-safe), each bounded by the client's timeouts and its standard
retry mode (throttling included).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import UpstreamFailed, UpstreamTimeout

#: The dimensions Titan Text Embeddings V2 produces.
TITAN_V2_DIMENSIONS = (256, 512, 1024)


class TitanEmbedder:
    def __init__(
        self,
        model: str = "amazon.titan-embed-text-v2:0",
        dimension: int = 1024,
        *,
        timeout: float = 30.0,
        concurrency: int = 8,
        client: Any = None,
    ) -> None:
        if "titan-embed-text-v2" in model and dimension not in TITAN_V2_DIMENSIONS:
            raise ValueError(f"{model} embeds in 256, 512 or 1024 dimensions, not {dimension}")
        if client is None:
            from .. import aws

            client = aws.client("bedrock-runtime", read_timeout=timeout, attempts=3)
        self.model = model
        self.dimension = dimension
        self._client = client
        self._concurrency = max(1, concurrency)

    def embed(self, texts: list[str]) -> list[list[float]]:
        if len(texts) <= 1:
            return [self._one(text) for text in texts]
        with ThreadPoolExecutor(min(self._concurrency, len(texts))) as pool:
            return list(pool.map(self._one, texts))

    def _one(self, text: str) -> list[float]:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            ReadTimeoutError,
        )

        body = json.dumps({"inputText": text, "dimensions": self.dimension, "normalize": True})
        try:
            answer = self._client.invoke_model(
                modelId=self.model,
                body=body,
                contentType="application/json",
                accept="application/json",
            )
            vector = json.loads(answer["body"].read())["embedding"]
        except (ReadTimeoutError, ConnectTimeoutError) as err:
            raise UpstreamTimeout(f"embedding model {self.model} timed out") from err
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "error")
            message = err.response.get("Error", {}).get("Message", "")
            raise UpstreamFailed(f"embedding model {self.model} failed: {code} {message}") from err
        except BotoCoreError as err:
            raise UpstreamFailed(f"embedding model {self.model} failed: {err}") from err
        except (ValueError, KeyError, TypeError) as err:
            raise UpstreamFailed(f"embedding model {self.model} sent a malformed reply") from err
        if not isinstance(vector, list):
            raise UpstreamFailed(f"embedding model {self.model} sent a malformed reply")
        if len(vector) != self.dimension:
            raise UpstreamFailed(
                f"embedding model {self.model} answered {len(vector)} dimensions,"
                f" not {self.dimension}"
            )
        return [float(v) for v in vector]
