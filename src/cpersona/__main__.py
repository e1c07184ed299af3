"""``python -m cpersona``: the same command as the ``cpersona`` console script."""

from cpersona.cli import main

raise SystemExit(main())
