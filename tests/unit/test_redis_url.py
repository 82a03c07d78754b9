"""`LEASEGATE_REDIS_URL` for a Redis Cluster: seeds, credentials, TLS, and one-line errors."""

from __future__ import annotations

import pytest

from leasegate.config import ConfigError, load_config
from leasegate.config.redis_url import ClusterUrl, is_cluster_url, parse_cluster_url


def test_seeds_credentials_and_tls_are_read() -> None:
    assert parse_cluster_url("redis+cluster://10.0.0.1:7000,10.0.0.2:7001") == ClusterUrl(
        (("10.0.0.1", 7000), ("10.0.0.2", 7001))
    )
    parsed = parse_cluster_url("rediss+cluster://app:p%40ss@redis-0.svc:6379/0?x=1")
    assert parsed == ClusterUrl((("redis-0.svc", 6379),), True, "app", "p@ss")
    assert parse_cluster_url("redis+cluster://[::1]:7000").nodes == (("::1", 7000),)


def test_only_the_cluster_schemes_are_cluster_urls() -> None:
    assert is_cluster_url("redis+cluster://h:1")
    assert is_cluster_url("rediss+cluster://h:1")
    assert not is_cluster_url("redis://h:1")


@pytest.mark.parametrize(
    "url",
    [
        "redis+cluster://",
        "redis+cluster://host",
        "redis+cluster://h:1,h:x",
        "redis+cluster://h:70000",
    ],
)
def test_a_bad_seed_list_is_a_one_line_configuration_error(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({"LEASEGATE_REDIS_URL": url})
    assert "LEASEGATE_REDIS_URL" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_password_never_appears_in_an_error_or_repr() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({"LEASEGATE_REDIS_URL": "redis+cluster://u:hunter2@h:1,bad"})
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(parse_cluster_url("redis+cluster://u:hunter2@h:1"))


def test_a_cluster_url_selects_production_mode() -> None:
    config = load_config({"LEASEGATE_REDIS_URL": "redis+cluster://127.0.0.1:7000"})
    assert config.settings.production
