"""Every Redis key and channel name, in one place.

On a Redis Cluster a Lua script may touch only keys of one hash slot. Every key of an account
therefore carries the hash tag `{acct:<account id>}`: the record script's pair and circuit
hashes, and an account's slot set, land in the same slot, while different accounts spread
over the cluster. Only the text between the first `{` and the next `}` is hashed, and the
prefix cannot contain a brace (LEASEGATE_REDIS_PREFIX's pattern), so every key of one account
hashes alike whatever characters its id holds.

    {prefix}:{acct:<id>}:health:c              the account circuit (hash)
    {prefix}:{acct:<id>}:health:m:<model>      an (account, served model) pair (hash)
    {prefix}:{acct:<id>}:slots                 request slots in flight (sorted set)
    {prefix}:{acct:<id>}:quota:<model>         an (account, served model)'s learned quota (hash)
    {prefix}:audit:witness                     the audit witness (hash; one key)
    {prefix}:revocations                       revocation fan-out (pub/sub channel)
    {prefix}:health-news                       health and quota news between proxies (pub/sub)
    {prefix}:{chain:<id>}:spend                a running spend total (hash): <id> a chain's id,
                                               or tenant:<tenant>:<period>:<label>
    {prefix}:console:sessions                  the console's open sessions (sorted set; one key)
"""

from __future__ import annotations


def account_tag(prefix: str, account_id: str) -> str:
    return f"{prefix}:{{acct:{account_id}}}"


def circuit_key(prefix: str, account_id: str) -> str:
    return f"{account_tag(prefix, account_id)}:health:c"


def pair_key(prefix: str, account_id: str, model: str) -> str:
    return f"{account_tag(prefix, account_id)}:health:m:{model}"


def quota_key(prefix: str, account_id: str, model: str) -> str:
    return f"{account_tag(prefix, account_id)}:quota:{model}"


def slots_key(prefix: str, account_id: str) -> str:
    return f"{account_tag(prefix, account_id)}:slots"


def witness_key(prefix: str) -> str:
    return f"{prefix}:audit:witness"


def revocations_channel(prefix: str) -> str:
    return f"{prefix}:revocations"


def health_news_channel(prefix: str) -> str:
    return f"{prefix}:health-news"


def chain_spend_key(prefix: str, chain_id: str) -> str:
    return f"{prefix}:{{chain:{chain_id}}}:spend"


def console_sessions_key(prefix: str) -> str:
    return f"{prefix}:console:sessions"
