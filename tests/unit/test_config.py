"""Every bad value stops start-up with one line naming the variable, or the account and field."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from leasegate.config import ConfigError, load_config
from leasegate.control_plane.main import warn_per_process_console_key
from tests.fixtures.deploy_files import check_server

GOOD_ACCOUNT = """
  - id: openai-main
    provider: openai
    base_url: https://api.openai.com
    credential_env: LEASEGATE_CRED_OPENAI_MAIN
    models: {gpt-4o: gpt-4o-2024-08-06, gpt-4o-mini: gpt-4o-mini}
"""


def _accounts(tmp_path: Path, body: str) -> dict[str, str]:
    path = tmp_path / "accounts.yaml"
    path.write_text(body)
    return {"LEASEGATE_ACCOUNTS_FILE": str(path)}


def test_defaults_give_embedded_mode() -> None:
    config = load_config({})
    assert config.settings.database_url.startswith("sqlite+aiosqlite://")
    assert config.settings.redis_url is None
    assert config.settings.max_fallback_hops == 1
    assert (config.settings.key_ttl_s, config.settings.key_max_ttl_s) == (900, 86400)
    assert config.registry.accounts == ()


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("LEASEGATE_KEY_TTL_S", "soon", "LEASEGATE_KEY_TTL_S"),
        ("LEASEGATE_KEY_TTL_S", "0", "LEASEGATE_KEY_TTL_S"),
        ("LEASEGATE_KEY_TTL_S", "100000", "LEASEGATE_KEY_TTL_S must not exceed"),
        ("LEASEGATE_KEY_MAX_TTL_S", "-1", "LEASEGATE_KEY_MAX_TTL_S"),
        ("LEASEGATE_MAX_FALLBACK_HOPS", "-1", "LEASEGATE_MAX_FALLBACK_HOPS"),
        ("LEASEGATE_DATABASE_POOL_SIZE", "0", "LEASEGATE_DATABASE_POOL_SIZE"),
        ("LEASEGATE_DATABASE_POOL_SIZE", "many", "LEASEGATE_DATABASE_POOL_SIZE"),
        ("LEASEGATE_FAILURE_THRESHOLD", "0", "LEASEGATE_FAILURE_THRESHOLD"),
        ("LEASEGATE_ACCOUNT_FAILURE_THRESHOLD", "x", "LEASEGATE_ACCOUNT_FAILURE_THRESHOLD"),
        ("LEASEGATE_BASE_COOLDOWN_S", "0", "LEASEGATE_BASE_COOLDOWN_S"),
        ("LEASEGATE_BASE_COOLDOWN_S", "900", "LEASEGATE_BASE_COOLDOWN_S must not exceed"),
        ("LEASEGATE_MAX_COOLDOWN_S", "nope", "LEASEGATE_MAX_COOLDOWN_S"),
        ("LEASEGATE_DATABASE_URL", "mysql://x", "LEASEGATE_DATABASE_URL"),
        ("LEASEGATE_REDIS_URL", "http://x", "LEASEGATE_REDIS_URL"),
        ("LEASEGATE_ADMIN_TOKENS", "alice", "LEASEGATE_ADMIN_TOKENS"),
        ("LEASEGATE_ADMIN_TOKENS", "a=1,a=2", "LEASEGATE_ADMIN_TOKENS"),
        ("LEASEGATE_ADMIN_TOKENS", "bad name=1", "LEASEGATE_ADMIN_TOKENS"),
        ("LEASEGATE_LOG_LEVEL", "LOUD", "LEASEGATE_LOG_LEVEL"),
        ("LEASEGATE_TENANT_RESIDENCY", "{not json", "LEASEGATE_TENANT_RESIDENCY"),
        ("LEASEGATE_TENANT_RESIDENCY", '{"t": {"allowed_providers": ["aws"]}}', "unknown"),
        ("LEASEGATE_TENANT_RESIDENCY", '{"t": {"allowed_regions": []}}', "TENANT_RESIDENCY"),
        ("LEASEGATE_TENANT_RESIDENCY", '{"t": {"regions": ["x"]}}', "TENANT_RESIDENCY"),
    ],
)
def test_bad_variable_names_itself_in_one_line(variable: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({variable: value})
    message = str(caught.value)
    assert fragment in message
    assert "\n" not in message


def test_admin_tokens_are_secret_and_named() -> None:
    config = load_config({"LEASEGATE_ADMIN_TOKENS": "alice=s3cret-a,bob=s3cret-b"})
    assert set(config.settings.admin_tokens) == {"alice", "bob"}
    assert "s3cret" not in repr(config.settings)


def test_accounts_file_loads_in_order_with_aliases(tmp_path: Path) -> None:
    env = _accounts(tmp_path, "accounts:" + GOOD_ACCOUNT)
    env["LEASEGATE_CRED_OPENAI_MAIN"] = "sk-test"
    config = load_config(env)
    (account,) = config.registry.accounts
    assert account.configured
    assert account.models["gpt-4o"] == "gpt-4o-2024-08-06"
    assert config.registry.candidates("gpt-4o")[0].served_model == "gpt-4o-2024-08-06"
    assert config.credentials["openai-main"].get_secret_value() == "sk-test"


def test_unset_or_empty_credential_is_not_configured(tmp_path: Path) -> None:
    env = _accounts(tmp_path, "accounts:" + GOOD_ACCOUNT)
    env["LEASEGATE_CRED_OPENAI_MAIN"] = ""
    config = load_config(env)
    assert not config.registry.accounts[0].configured
    assert config.credentials == {}


def test_list_of_models_means_identical_names(tmp_path: Path) -> None:
    body = "accounts:" + GOOD_ACCOUNT.replace(
        "{gpt-4o: gpt-4o-2024-08-06, gpt-4o-mini: gpt-4o-mini}", "[a-model, b-model]"
    )
    config = load_config(_accounts(tmp_path, body))
    assert dict(config.registry.accounts[0].models) == {"a-model": "a-model", "b-model": "b-model"}


@pytest.mark.parametrize(
    ("replace", "by", "fragment"),
    [
        ("id: openai-main", "id: Bad_Id", "field 'id'"),
        ("provider: openai", "provider: azure", "field 'provider'"),
        ("base_url: https://api.openai.com", "base_url: ftp://x", "field 'base_url'"),
        ("base_url: https://api.openai.com", "base_url: not a url", "field 'base_url'"),
        (
            "credential_env: LEASEGATE_CRED_OPENAI_MAIN",
            "credential_env: OPENAI_API_KEY",
            "field 'credential_env'",
        ),
        ("    models:", "    lease_capacity: -1\n    models:", "field 'lease_capacity'"),
        ("    models:", "    request_capacity: -3\n    models:", "field 'request_capacity'"),
        ("    models:", "    colour: blue\n    models:", "field 'colour'"),
        ("    models:", "    propagate_trace: 'yes'\n    models:", "field 'propagate_trace'"),
        (
            "{gpt-4o: gpt-4o-2024-08-06, gpt-4o-mini: gpt-4o-mini}",
            "{}",
            "field 'models'",
        ),
    ],
)
def test_bad_account_names_account_and_field(
    tmp_path: Path, replace: str, by: str, fragment: str
) -> None:
    body = "accounts:" + GOOD_ACCOUNT.replace(replace, by)
    with pytest.raises(ConfigError) as caught:
        load_config(_accounts(tmp_path, body))
    message = str(caught.value)
    assert fragment in message
    assert "account" in message
    assert "\n" not in message


def test_trace_propagation_is_off_unless_the_account_asks_for_it(tmp_path: Path) -> None:
    asks = GOOD_ACCOUNT.replace("openai-main", "openai-traced").replace(
        "    models:", "    propagate_trace: true\n    models:"
    )
    config = load_config(_accounts(tmp_path, "accounts:" + GOOD_ACCOUNT + asks))
    assert [a.propagate_trace for a in config.registry.accounts] == [False, True]


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"openai-main.*duplicate"):
        load_config(_accounts(tmp_path, "accounts:" + GOOD_ACCOUNT + GOOD_ACCOUNT))


def test_unreadable_or_invalid_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="LEASEGATE_ACCOUNTS_FILE: cannot read"):
        load_config({"LEASEGATE_ACCOUNTS_FILE": str(tmp_path / "missing.yaml")})
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(_accounts(tmp_path, "accounts: [unclosed"))
    with pytest.raises(ConfigError, match="top level"):
        load_config(_accounts(tmp_path, "- just a list"))


def test_credential_that_cannot_be_a_header_is_refused_without_echo(tmp_path: Path) -> None:
    env = _accounts(tmp_path, "accounts:" + GOOD_ACCOUNT)
    env["LEASEGATE_CRED_OPENAI_MAIN"] = "sk-has space"
    with pytest.raises(ConfigError) as caught:
        load_config(env)
    assert "LEASEGATE_CRED_OPENAI_MAIN" in str(caught.value)
    assert "sk-has" not in str(caught.value)


def test_unknown_leasegate_variables_are_reported_but_credentials_are_not() -> None:
    config = load_config(
        {
            "LEASEGATE_REDIS_ULR": "redis://x",
            "LEASEGATE_CRED_ANY": "sk",
            "LEASEGATE_KEY_TTL_S": "60",
        }
    )
    assert config.unknown_variables == ("LEASEGATE_REDIS_ULR",)


_PRODUCTION = {"LEASEGATE_REDIS_URL": "redis://127.0.0.1:6379/0", "LEASEGATE_CONTROL_TOKEN": "t"}


@pytest.mark.parametrize("command", ["control-plane", "proxy"])
def test_a_server_needs_redis(command: str) -> None:
    with pytest.raises(ConfigError, match=r"^LEASEGATE_REDIS_URL: required"):
        check_server(command, 1, load_config({}).settings)


def test_control_plane_workers_without_a_console_secret_refuse_to_start() -> None:
    """Each worker would sign console sessions with a key of its own: half the console's
    requests would bounce to sign-in. One process, or a shared secret, is fine."""
    settings = load_config(_PRODUCTION).settings
    with pytest.raises(ConfigError, match=r"^LEASEGATE_CONSOLE_SECRET: required with --workers"):
        check_server("control-plane", 2, settings)
    check_server("control-plane", 1, settings)
    check_server("proxy", 2, settings)  # the proxy has no console
    shared = load_config({**_PRODUCTION, "LEASEGATE_CONSOLE_SECRET": "s" * 32}).settings
    check_server("control-plane", 2, shared)


def test_a_control_plane_without_a_console_secret_warns_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Replicas cannot be seen from inside a process: the warning names the setting."""
    with caplog.at_level(logging.WARNING, logger="leasegate.startup"):
        warn_per_process_console_key(load_config(_PRODUCTION))
        assert "LEASEGATE_CONSOLE_SECRET is unset" in caplog.text
        caplog.clear()
        warn_per_process_console_key(
            load_config({**_PRODUCTION, "LEASEGATE_CONSOLE_SECRET": "s" * 32})
        )
        assert caplog.text == ""


def test_tenant_settings_are_read_from_their_json_text() -> None:
    settings = load_config(
        {
            "LEASEGATE_TENANT_SHARES": '{"acme/web": 3}',
            "LEASEGATE_TENANT_RESIDENCY": (
                '{"acme/eu": {"allowed_providers": ["bedrock"], '
                '"allowed_regions": ["eu-central-1"]}}'
            ),
        }
    ).settings
    assert settings.tenant_shares == {"acme/web": 3.0}
    eu = settings.tenant_residency["acme/eu"]
    assert (eu.allowed_providers, eu.allowed_regions) == (("bedrock",), ("eu-central-1",))
