"""Test doubles shipped with the library: models that reply from a script or a function."""

from ._models import FunctionModel, ModelRequest, ScriptedModel

__all__ = ["FunctionModel", "ModelRequest", "ScriptedModel"]
