"""The schema check's reading of the migrations (without Alembic) agrees with Alembic's, and
says what a database lacks."""

from __future__ import annotations

import pytest
from alembic.script import ScriptDirectory

from leasegate.db.migrate import alembic_config
from leasegate.schema import (
    Migration,
    SchemaCheck,
    SchemaNotReady,
    missing,
    parse_migration,
    release_migrations,
)


def test_the_migrations_read_from_their_files_are_alembics() -> None:
    scripts = ScriptDirectory.from_config(alembic_config("sqlite+aiosqlite://"))
    alembic = {s.revision: tuple(s._all_down_revisions) for s in scripts.walk_revisions()}
    ours = release_migrations()
    assert {m.revision: m.down_revisions for m in ours} == alembic
    (head,) = scripts.get_heads()
    assert missing({head}, ours) == []
    assert [m.name for m in ours] == sorted(m.name for m in ours)
    assert ours[0].name.startswith("0001_")


CHAIN = (
    Migration("0001", (), "0001_initial"),
    Migration("b", ("0001",), "0002_b"),
    Migration("c", ("b",), "0003_c"),
)


def test_missing_names_what_the_database_lacks() -> None:
    assert [m.name for m in missing(set(), CHAIN) or []] == ["0001_initial", "0002_b", "0003_c"]
    assert [m.name for m in missing({"b"}, CHAIN) or []] == ["0003_c"]
    assert missing({"c"}, CHAIN) == []
    assert missing({"from-a-newer-release"}, CHAIN) is None  # ahead of this release: ready


def test_a_merge_migration_has_two_parents() -> None:
    source = 'revision: str = "m"\ndown_revision: tuple[str, str] | None = ("a", "b")\n'
    assert parse_migration("0009_merge", source) == Migration("m", ("a", "b"), "0009_merge")
    assert parse_migration("helper", "x = 1\n") is None


async def test_the_check_reads_until_the_schema_is_at_head_then_never_again() -> None:
    applied: list[frozenset[str]] = [frozenset({"b"}), frozenset({"c"})]
    reads: list[frozenset[str]] = []

    async def read() -> frozenset[str]:
        reads.append(applied[0] if len(reads) == 0 else applied[1])
        return reads[-1]

    check = SchemaCheck(read, CHAIN)
    behind = r"^behind: missing 0003_c \(run `leasegate migrate`\)$"
    with pytest.raises(SchemaNotReady, match=behind):
        await check()
    await check()
    await check()
    assert len(reads) == 2  # at head: /readyz costs no database read from now on
