"""The account registry: accounts in priority order and the candidates for a model (pure)."""

from leasegate.accounts.registry import (
    Account,
    AccountsFileError,
    Candidate,
    DeclaredLimits,
    Provider,
    Registry,
    parse_accounts,
)

__all__ = [
    "Account",
    "AccountsFileError",
    "Candidate",
    "DeclaredLimits",
    "Provider",
    "Registry",
    "parse_accounts",
]
