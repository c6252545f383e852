"""Notifications: tell people (a webhook, an email, a Slack channel) when a question is asked,
nears its deadline, is escalated, expires or is answered.

``App(notify=[Webhook(url, secret=...), Email(host, port, sender=..., to=...),
Slack(channel)])``, or
``interlude serve --worker`` / ``interlude worker`` with ``--notify URL``. Workers keep a
durable outbox in the session store: each notification has a deterministic id, is delivered at
least once (also across crashes), and receivers de-duplicate by its id. See the guide
(docs/notifications.md).
"""

from __future__ import annotations

from ..sessions import Notification, NotificationOutbox
from ._email import Email
from ._events import EVENTS, Event, notification_id
from ._notifier import Notifications, NotificationTarget, Notifier, target_from_url
from ._slack import Slack, SlackAnswer, button_answers
from ._webhook import Webhook, signature

__all__ = [
    "EVENTS",
    "Email",
    "Event",
    "Notification",
    "NotificationOutbox",
    "NotificationTarget",
    "Notifications",
    "Notifier",
    "Slack",
    "SlackAnswer",
    "Webhook",
    "button_answers",
    "notification_id",
    "signature",
    "target_from_url",
]
