from __future__ import annotations

from collections.abc import Iterator

import pytest

from .receivers import Receiver, start_receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r, server = start_receiver()
    yield r
    server.shutdown()
    server.server_close()
