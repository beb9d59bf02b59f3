"""``python -m trnsim`` is the same as the ``trnsim`` command."""

from trnsim.cli.main import main

raise SystemExit(main())
