"""Facts the docs restate are held to the one place that decides them, the code.

- Every table in docs/ that says what a failure's evidence row is (outcome, scope, qualifying)
  is read row by row and each row's observation is classified by `leasegate.routing.classify`:
  a row that disagrees, or a new row with no observation below, fails.
- No doc says a cooldown window grows with the trips (`leasegate.routing.health` keeps it one
  window: a sentence about backing off, doubling or growing must say it does not).
- The operator commands the docs exempt from validating the configuration are exactly the
  CLI's `ADMIN_COMMANDS`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from leasegate.cli.admin import ADMIN_COMMANDS
from leasegate.core.observation import Classification, Observation
from leasegate.routing import health
from leasegate.routing.classify import classify

DOCS = Path(__file__).resolve().parents[2] / "docs"

# The first words of each row (its first cell) -> an observation that row describes.
OBSERVED = {
    # api.md, "Terminal evidence"
    "2xx, body or stream complete": Observation("response", status=200),
    "billing/quota/auth code": Observation("response", status=429, error_code="insufficient_quota"),
    "401, 402, 403": Observation("response", status=403),
    "other error event in a 2xx stream": Observation("stream-error", error_type="server_error"),
    "404 with a model-not-found code": Observation(
        "response", status=404, error_code="model_not_found"
    ),
    "408, 429, 5xx": Observation("response", status=503),
    "headers, first-token, idle or read timeout": Observation("timeout"),
    "connect, DNS, TLS failure": Observation("connect-error"),
    "connection closed or reset after the request went out": Observation("dropped"),
    "a 4xx whose error payload says the context window": Observation(
        "response", status=400, context_length=True
    ),
    "any other 4xx": Observation("response", status=422),
    "client went away": Observation("client-abort"),
    "stream still running when the shutdown drain ended": Observation("gateway-shutdown"),
    "refused `model-cooling`": Observation("refused", refusal_code="model-cooling"),
    "any other gateway refusal": Observation("refused", refusal_code="upstream-pool-exhausted"),
    # upstream-failures.md, "The table, as built"
    "accepts the connection, never sends headers": Observation("timeout"),
    "connection refused, DNS or TLS failure": Observation("connect-error"),
    "stream opens, first token later": Observation("timeout"),
    "stream stalls mid-answer": Observation("timeout"),
    "stream cut mid-answer": Observation("truncated"),
    "one malformed data event": Observation("response", status=200),
    "stream complete but no `[DONE]`": Observation("response", status=200),
    "400 context-length": Observation("response", status=400, context_length=True),
    "400 content-filter refusal": Observation("response", status=400, error_code="content_filter"),
}


def _tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every markdown table: its header cells and its rows' cells."""
    found = []
    for block in re.findall(r"(?:^\|.*\|\n)+", text, re.M):
        lines = [line for line in block.splitlines() if not re.fullmatch(r"\|[\s|:-]+\|", line)]
        cells = [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
        found.append((cells[0], cells[1:]))
    return found


def _outcome_rows() -> list[tuple[str, dict[str, str]]]:
    rows = []
    for path in sorted(DOCS.glob("*.md")):
        for header, body in _tables(path.read_text()):
            named = [h.split(" ")[-1] if h.startswith("evidence") else h for h in header]
            if {"scope", "qualifying"} <= set(named) and any("outcome" in h for h in header):
                columns = ["case", *(("outcome" if "outcome" in h else h) for h in header[1:])]
                rows += [(path.name, dict(zip(columns, row, strict=True))) for row in body]
    return rows


def _scope(cell: str) -> str | None:
    word = cell.split(" ")[0].strip("`")
    return word if word in ("model", "account") else None


@pytest.mark.parametrize(("doc", "row"), _outcome_rows(), ids=lambda v: str(v)[:50])
def test_each_documented_failure_row_is_what_the_classifier_says(
    doc: str, row: dict[str, str]
) -> None:
    matches = [text for text in OBSERVED if row["case"].startswith(text)]
    assert matches, f"{doc}: no observation for the row {row['case']!r}: add one to OBSERVED"
    seen: Classification = classify(OBSERVED[max(matches, key=len)])
    outcome = re.findall(r"`([^`]+)`", row["outcome"])
    assert outcome[0] == seen.outcome, f"{doc}: {row['case']!r}"
    reason = re.search(r"^`[^`]+` \(`([^`]+)`\)", row["outcome"])
    if reason is not None:
        assert reason.group(1) == seen.reason, f"{doc}: {row['case']!r}"
    assert _scope(row["scope"]) == seen.scope, f"{doc}: {row['case']!r}"
    qualifying = row["qualifying"]
    if qualifying.startswith("only for a hop to the model's `context_fallback`"):
        assert (seen.outcome, seen.qualifying) == ("context-length-exceeded", False)
    else:
        assert qualifying.split(" ")[0] == ("yes" if seen.qualifying else "no"), row["case"]


def test_both_outcome_tables_are_read() -> None:
    assert {doc for doc, _ in _outcome_rows()} >= {"api.md", "upstream-failures.md"}


_GROWTH = re.compile(r"\b(back(s|ing)? off|backoff|doubl\w*|exponential\w*|grows?)\b", re.I)
_DENIED = re.compile(
    r"\b(no|not|never|no longer|instead|before this change|original contract)\b", re.I
)


def test_no_doc_says_a_cooldown_grows_with_its_trips() -> None:
    assert "The window does not grow with the trips" in (health.__doc__ or "")
    claims = []
    for path in sorted(DOCS.glob("*.md")):
        text = re.sub(r"\s+", " ", path.read_text())
        for sentence in re.split(r"(?<=[.;|])\s", text):
            about_cooldowns = re.search(r"cooldown|\bwindow|\btrips\b", sentence, re.I)
            if about_cooldowns and _GROWTH.search(sentence) and not _DENIED.search(sentence):
                claims.append(f"{path.name}: {sentence[:160]}")
    assert claims == []


def test_the_docs_exempt_exactly_the_operator_commands_from_validating_settings() -> None:
    *first, last = sorted(ADMIN_COMMANDS)
    named = ", ".join(f"`{c}`" for c in first) + f" and `{last}`"
    assert f"The operator commands {named} are clients" in re.sub(
        r"\s+", " ", (DOCS / "configuration.md").read_text()
    )
