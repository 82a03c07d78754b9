"""Configuration: LEASEGATE_* variables and the accounts file, validated once at start-up."""

from leasegate.config.load import Config, ConfigError, load_config
from leasegate.config.settings import Settings

__all__ = ["Config", "ConfigError", "Settings", "load_config"]
