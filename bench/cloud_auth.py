"""`python -m bench.cloud_auth`: the CPU a cloud kind adds to each request, beyond `anthropic`.

- `sigv4`: `leasegate.upstream.cloud_auth.sigv4_headers` (botocore's SigV4Auth over the final
  body and URL) with frozen credentials, as `AwsSigner.sign` does on every request between
  refreshes;
- `frozen`: `AwsSigner.frozen()` on botocore refreshable credentials that are not due (the
  per-request look-up);
- `token`: `GoogleToken.sign` with a valid token (the per-request path of `vertex`);
- `eventstream`: decoding one Bedrock stream event (a typical `content_block_delta`) into
  Anthropic SSE (`EventStreamDecoder.feed`, botocore's parser), per event.

Each is timed over N calls with process CPU time (no network, one core); a typical request
body of about 2 KB. Reported in microseconds per call. `make bench` (bench/run.py) prints the
same figures after its phases (`measure`, `report`), when the `bedrock` and `vertex` extras
are installed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import time
from collections.abc import Callable

from botocore.credentials import ReadOnlyCredentials, RefreshableCredentials
from yarl import URL

from leasegate.demo import eventstream
from leasegate.providers.bedrock import EventStreamDecoder
from leasegate.upstream.cloud_auth import AwsSigner, GoogleToken, sigv4_headers

BODY = json.dumps(
    {
        "max_tokens": 1024,
        "anthropic_version": "bedrock-2023-05-31",
        "messages": [{"role": "user", "content": "x" * 1900}],
    }
).encode()
URL_ = URL(
    "https://bedrock-runtime.eu-central-1.amazonaws.com/model/"
    "eu.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke",
    encoded=True,
)
HEADERS = (("content-type", "application/json"), ("accept", "application/json"))


def per_call_us(fn: Callable[[], object], n: int) -> float:
    for _ in range(min(n, 200)):
        fn()
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) / n * 1e6


def measure(n: int = 20_000) -> dict[str, float]:
    """Microseconds of process CPU per call of each step, over `n` calls each."""
    frozen = ReadOnlyCredentials("AKIAEXAMPLE", "secret", "session-token")
    sigv4 = per_call_us(
        lambda: sigv4_headers(frozen, "bedrock", "eu-central-1", URL_, HEADERS, BODY), n
    )

    expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    refreshable = RefreshableCredentials("AKIAEXAMPLE", "secret", "token", expiry, dict, "bench")
    signer = AwsSigner("bench", {"region": "eu-central-1"})
    signer._credentials = refreshable  # as after the first request's look-up
    look_up = per_call_us(signer.frozen, n)

    token = GoogleToken("bench")

    class _Valid:
        valid = True
        token = "ya29.x"  # noqa: S105 - a placeholder, never sent

    token._current = (_Valid(), (("authorization", "Bearer ya29.x"),))  # as after a refresh
    loop = asyncio.new_event_loop()

    async def many() -> None:
        for _ in range(n):
            await token.sign(URL_, HEADERS, BODY)

    start = time.process_time()
    loop.run_until_complete(many())
    google = (time.process_time() - start) / n * 1e6
    loop.close()

    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "a word or two "},
    }
    frame = eventstream.chunk(json.dumps(delta).encode())
    decoder = EventStreamDecoder()
    decode = per_call_us(lambda: decoder.feed(frame), n)
    return {
        "sigv4_us_per_request": round(sigv4, 1),
        "aws_frozen_credentials_us_per_request": round(look_up, 1),
        "google_token_us_per_request": round(google, 1),
        "eventstream_us_per_event": round(decode, 1),
    }


def report(results: dict[str, float]) -> str:
    """The figures as `make bench` prints them."""
    return "\n".join(
        [
            f"sigv4 sign (2 KB body)      {results['sigv4_us_per_request']:8.1f} µs/request",
            f"aws frozen credentials      {results['aws_frozen_credentials_us_per_request']:8.1f}"
            " µs/request",
            f"google token (valid)        {results['google_token_us_per_request']:8.1f} µs/request",
            f"event-stream -> SSE         {results['eventstream_us_per_event']:8.1f} µs/event",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20_000)
    print(report(measure(parser.parse_args().n)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
