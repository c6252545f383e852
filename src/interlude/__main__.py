"""``python -m interlude``: the same as the ``interlude`` command."""

import sys

from .cli import main

sys.exit(main())
