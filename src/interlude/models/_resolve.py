"""``"provider:model"`` strings: pick a provider adapter, importing it only then."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from . import Model

__all__ = ["PROVIDERS", "model_from_string"]

# provider -> (module, class, the pip extra that installs its SDK)
PROVIDERS: dict[str, tuple[str, str, str]] = {
    "openai": ("interlude.models.openai", "OpenAIModel", "openai"),
    "anthropic": ("interlude.models.anthropic", "AnthropicModel", "anthropic"),
    "bedrock": ("interlude.models.bedrock", "BedrockModel", "bedrock"),
    "ollama": ("interlude.models.ollama", "OllamaModel", "ollama"),
}


def model_from_string(spec: str) -> Model:
    """The model a ``"provider:model-id"`` string names, e.g. ``"openai:gpt-4.1-mini"``.

    Keys come from each provider's usual environment variables; a missing SDK or key is a
    ConfigurationError saying what to install or set.
    """
    provider, _, model_id = spec.partition(":")
    if provider not in PROVIDERS or not model_id:
        known = ", ".join(f"{p}:<model>" for p in PROVIDERS)
        raise ConfigurationError(f"unknown model {spec!r}: use one of {known}")
    module_name, class_name, extra = PROVIDERS[provider]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and not exc.name.startswith("interlude"):
            raise ConfigurationError(
                f"model {spec!r} needs the {exc.name!r} package: "
                f"pip install 'interlude-agents[{extra}]'"
            ) from None
        raise
    model: Model = getattr(module, class_name).from_env(model_id)
    return model
