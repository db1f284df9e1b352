"""``python -m evidence_first.cli``: the ``evidence-first`` command."""

from evidence_first.cli import main

raise SystemExit(main())
