"""The shapes of ids, one pattern per kind of id (checked at the edges, before any store).

A *record id* names a row the gateway wrote (a key `k…`, a decision `md_…`, a request
`req_…`) or an account from the accounts file: it goes into 64-character columns, so its
pattern accepts no more than `RECORD_ID_MAX` characters (`tests/unit/test_id_patterns.py`
ties the two). A *dispatch part* is a caller's own name for a tenant or dispatch (free to
contain `/`, `@`), up to `DISPATCH_PART_MAX`.
"""

from __future__ import annotations

import re

RECORD_ID_MAX = 64
"""The length of every id column (`String(64)`)."""
RECORD_ID_PATTERN = rf"^[A-Za-z0-9_.:-]{{1,{RECORD_ID_MAX}}}$"
RECORD_ID = re.compile(RECORD_ID_PATTERN)

DISPATCH_PART_MAX = 200
DISPATCH_PART_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._:/@-]{{0,{DISPATCH_PART_MAX - 1}}}$"
DISPATCH_PART = re.compile(DISPATCH_PART_PATTERN)
