"""AG-UI: serve an :class:`~interlude.App`'s agents to AG-UI front-ends (the ``[ag-ui]`` extra).

``POST /ag-ui/{agent}`` takes AG-UI's ``RunAgentInput`` (its ``threadId`` is the session id)
and streams the run as AG-UI events over server-sent events. A run that pauses ends with
``RUN_FINISHED`` whose ``outcome`` is ``{"type": "interrupt", "interrupts": [...]}``, one per
pending question; the next run answers them in ``resume[]``, checked as
:meth:`~interlude.Agent.resume` checks answers. ``interlude serve`` mounts the endpoint when it
serves an App; :func:`create_endpoint` mounts it in an application of your own. See
docs/protocols.md.
"""

from ._endpoint import create_endpoint

__all__ = ["create_endpoint"]
