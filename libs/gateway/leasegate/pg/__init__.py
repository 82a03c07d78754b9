"""Postgres over plain asyncpg: the pool with its deadlines, the one error rule, and the
statements a proxy runs (key reads, evidence batches, the audit chain's reads). Shared with
the SQLAlchemy store of `leasegate.db`, which runs the same statements, so a proxy serves
without SQLAlchemy."""
