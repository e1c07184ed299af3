"""``python -m cpersona``: the same command as the ``cpersona`` console script."""

from cpersona.edges.cli.main import main

raise SystemExit(main())
