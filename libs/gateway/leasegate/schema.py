"""Whether the database's schema is at this release's migrations: `/readyz`'s `schema` check.

A server started against a database that `leasegate migrate` has not brought up to this
release would answer every mint 503; readiness says so instead, naming the migrations that
are missing. The migrations are read from their files (their `revision` and `down_revision`
assignments, parsed with `ast`), so neither Alembic nor SQLAlchemy is imported: a proxy never
loads them. The folder is the leasegate-gateway wheel's bundled copy or the source checkout's
(`libs/gateway/migrations/`), the same one `leasegate migrate` runs (leasegate.db.migrate).

A database at a revision this release does not know was migrated by a newer release (during a
rolling upgrade the old pods still serve): ready. Once the schema was seen at or past this
release's head the check is not repeated (a schema is never migrated backwards under a
running gateway), so a ready process pays nothing for it.
"""

from __future__ import annotations

import ast
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent  # .../leasegate (site-packages or libs/gateway)
_BUNDLED = _PACKAGE / "_migrations"  # present in a built wheel
_SOURCE = Path(__file__).resolve().parents[1] / "migrations"  # a source checkout: libs/gateway/


def migrations_folder() -> Path | None:
    """The migrations folder: the wheel's bundled copy, else the source checkout's."""
    for candidate in (_BUNDLED, _SOURCE):
        if (candidate / "env.py").is_file():
            return candidate
    return None


@dataclass(frozen=True, slots=True)
class Migration:
    revision: str
    down_revisions: tuple[str, ...]
    name: str
    """The file's name without `.py` (`0007_renew_function`): what an operator reads."""


def parse_migration(name: str, source: str) -> Migration | None:
    """The revision and its parents from a migration file's top-level assignments."""
    values: dict[str, object] = {}
    for node in ast.parse(source).body:
        target: ast.expr | None = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
            values[target.id] = ast.literal_eval(value)
    revision, down = values.get("revision"), values.get("down_revision")
    if not isinstance(revision, str):
        return None
    if isinstance(down, str):
        downs: tuple[str, ...] = (down,)
    elif isinstance(down, tuple | list):
        downs = tuple(d for d in down if isinstance(d, str))  # a merge migration
    else:
        downs = ()
    return Migration(revision, downs, name)


@cache
def release_migrations(folder: Path | None = None) -> tuple[Migration, ...]:
    """Every migration of this release, in file-name order."""
    where = folder or migrations_folder()
    if where is None:
        return ()
    found = (
        parse_migration(path.stem, path.read_text()) for path in sorted(where.glob("versions/*.py"))
    )
    return tuple(m for m in found if m is not None)


def missing(applied: Iterable[str], migrations: Sequence[Migration]) -> list[Migration] | None:
    """The migrations the database still lacks, in order; None when it carries a revision
    this release does not know (a newer release migrated it)."""
    parents = {m.revision: m.down_revisions for m in migrations}
    done: set[str] = set()
    stack = list(applied)
    while stack:
        revision = stack.pop()
        if revision not in parents:
            return None
        if revision not in done:
            done.add(revision)
            stack.extend(parents[revision])
    return [m for m in migrations if m.revision not in done]


class SchemaNotReady(Exception):
    """The database lacks migrations this release needs; str() says which, in one line."""


class SchemaCheck:
    """`/readyz`'s probe: raises SchemaNotReady until the database is at this release's head
    (or past it), then never reads again. `read_applied` returns the revisions in the
    database's `alembic_version` (none when the table does not exist) and raises
    StoreError when the database cannot be reached."""

    def __init__(
        self,
        read_applied: Callable[[], Awaitable[frozenset[str]]],
        migrations: Sequence[Migration] | None = None,
    ) -> None:
        self._read = read_applied
        self._migrations = release_migrations() if migrations is None else migrations
        self._at_head = False

    async def __call__(self) -> None:
        if self._at_head:
            return
        applied = await self._read()
        lacking = missing(applied, self._migrations)
        if not lacking:
            self._at_head = True
            return
        names = ", ".join(m.name for m in lacking)
        state = "unmigrated" if not applied else "behind"
        raise SchemaNotReady(f"{state}: missing {names} (run `leasegate migrate`)")
