"""`"provider:model"` strings: the right adapter, or an error that says what to install/set."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from interlude import Agent
from interlude.errors import ConfigurationError
from interlude.models import model_from_string


@pytest.mark.parametrize("provider", ["openai", "anthropic", "bedrock", "ollama"])
def test_a_missing_sdk_says_which_extra_to_install(provider: str) -> None:
    sdk = {"openai": "openai", "anthropic": "anthropic", "bedrock": "boto3", "ollama": "ollama"}
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules[{sdk[provider]!r}] = None  # as if the extra were not installed
        from interlude import Agent
        from interlude.errors import ConfigurationError
        try:
            Agent({provider + ":some-model"!r})
        except ConfigurationError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert f"pip install 'interlude-agents[{provider}]'" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("spec", ["gpt-4.1", "nope:model", "openai:", ""])
def test_a_malformed_model_string_is_a_clear_error(spec: str) -> None:
    with pytest.raises(ConfigurationError, match=r"openai:<model>"):
        model_from_string(spec)
    with pytest.raises(ConfigurationError):
        Agent(spec)
