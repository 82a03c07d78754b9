"""The `vertex-gemini` kind: Gemini's wire on Vertex AI. Its behaviour tables are the `gemini`
kind's rows for the endpoints it serves (the same wire, the same error vocabulary); what is
its own is the upstream path under the project and location."""

from __future__ import annotations

from leasegate.providers import KINDS
from leasegate.providers.gemini import GENERATE, STREAM_GENERATE
from tests.unit.providers import test_gemini as gemini

COVERS = ("vertex-gemini",)
VERTEX_GEMINI = KINDS["vertex-gemini"]
ENTRY: dict[object, object] = {"project": "fleet-prod-1", "location": "europe-west1"}
_SERVED = {GENERATE, STREAM_GENERATE}

USAGE = [row for row in gemini.USAGE if row.endpoint in _SERVED]
STREAMS = [row for row in gemini.STREAMS if row.endpoint in _SERVED]
CLASSIFIED = [row for row in gemini.CLASSIFIED if row.endpoint in _SERVED]
RENDERED = [row for row in gemini.RENDERED if row.endpoint in _SERVED]


def test_the_model_goes_under_the_project_and_location() -> None:
    options = VERTEX_GEMINI.options(ENTRY)
    base = "/v1/projects/fleet-prod-1/locations/europe-west1/publishers/google/models/"
    assert VERTEX_GEMINI.upstream_path(GENERATE, "gemini-2.5-pro", options) == (
        base + "gemini-2.5-pro:generateContent"
    )
    assert VERTEX_GEMINI.upstream_path(STREAM_GENERATE, "gemini-2.5-pro", options) == (
        base + "gemini-2.5-pro:streamGenerateContent?alt=sse"
    )
    assert VERTEX_GEMINI.input_includes_cache
