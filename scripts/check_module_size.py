"""Fail when a source module grows past the size at which it should be split by use case."""

from __future__ import annotations

import sys
from pathlib import Path

LIMIT = 500
ROOTS = ("libs", "services")


def main() -> int:
    too_big = [
        (path, count)
        for root in ROOTS
        for path in sorted(Path(root).rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT
    ]
    for path, count in too_big:
        sys.stderr.write(f"{path}: {count} lines (limit {LIMIT}): split it by use case\n")
    return 1 if too_big else 0


if __name__ == "__main__":
    raise SystemExit(main())
