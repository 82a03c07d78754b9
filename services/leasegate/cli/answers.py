"""The control plane's answers as the CLI reads them: every body with its wire model
(`leasegate.wire`, the models the control plane answers with), a refusal with the error
envelope's (`leasegate.core.envelope`). A command calls `answer` and prints typed fields;
`run_admin` turns a `Refused` into its line on stderr and exit code 1.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ValidationError

from leasegate.core.envelope import Envelope
from leasegate.wire import Accounts

if TYPE_CHECKING:  # a server process never loads httpx (see cli/admin.py)
    import httpx

M = TypeVar("M", bound=BaseModel)


class Refused(Exception):
    """The control plane answered something other than success."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(response.status_code)
        self.response = response

    def report(self) -> int:
        """Its line on stderr (the envelope's code and message when it sent one); exit 1."""
        try:
            error = Envelope.model_validate_json(self.response.content).error
            detail = f"{error.code}: {error.message}"
        except ValidationError:
            detail = json.dumps(self.response.text[:200])
        sys.stderr.write(f"leasegate: HTTP {self.response.status_code} {detail}\n")
        return 1


def answer(response: httpx.Response, model: type[M]) -> M:
    """The 200 answer read with its model; `Refused` for any other status."""
    if response.status_code != 200:
        raise Refused(response)
    return model.model_validate_json(response.content)


def current_revision(client: httpx.Client) -> int:
    """The admin chain's revision a change must name (`expected_revision`): a concurrent
    change by another operator then answers 409 rather than being overwritten."""
    return answer(client.get("/control/v2/accounts"), Accounts).revision
