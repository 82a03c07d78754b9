"""Virtual keys: `lg_<key_id>_<secret>`, the secret stored only as a hash (pure)."""

from leasegate.keys.format import (
    ParsedKey,
    hash_secret,
    new_key,
    parse_key,
    secret_matches,
)

__all__ = ["ParsedKey", "hash_secret", "new_key", "parse_key", "secret_matches"]
