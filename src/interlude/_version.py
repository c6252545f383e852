"""The package's version, in a module of its own: the face and the layers below (tracing names
the instrumentation with it) read it from here, so nothing below the face imports the face."""

__version__ = "0.1.0"
