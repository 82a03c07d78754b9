"""`GoogleToken` under concurrency: google-auth refreshes credentials in place, in a thread,
and a request on the loop must never go out with a token whose header is not written yet (it
went out with no `authorization` at all, and Vertex answered 401: seen under load)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import google.auth
import pytest
from yarl import URL

from leasegate.upstream.cloud_auth import GoogleToken

URL_ = URL("https://europe-west1-aiplatform.googleapis.com/v1/projects/p/x:rawPredict")


class InPlaceCredentials:
    """Refreshed as google-auth's are: the token and expiry set on the object first, then
    the refresh still runs a while in its thread (the window a loaded machine opens)."""

    def __init__(self) -> None:
        self.token: str | None = None
        self.expiry: datetime | None = None
        self.refreshes = 0

    @property
    def valid(self) -> bool:
        now = datetime.now(UTC).replace(tzinfo=None)
        return self.token is not None and self.expiry is not None and now < self.expiry

    def refresh(self, request: object) -> None:
        self.refreshes += 1
        self.token = f"ya29.token-{self.refreshes}"
        self.expiry = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1)
        time.sleep(0.3)


async def test_requests_during_the_first_refresh_all_carry_its_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    credentials = InPlaceCredentials()
    monkeypatch.setattr(google.auth, "default", lambda scopes: (credentials, "project"))
    signer = GoogleToken("vertex-1")
    requests = []
    for _ in range(30):  # a request every 20 ms while the refresh runs (0.3 s)
        requests.append(asyncio.create_task(signer.sign(URL_, (), b"{}")))
        await asyncio.sleep(0.02)
    headers = await asyncio.gather(*requests)
    assert set(headers) == {(("authorization", "Bearer ya29.token-1"),)}
    assert credentials.refreshes == 1
