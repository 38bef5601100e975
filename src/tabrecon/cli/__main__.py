"""``python -m tabrecon.cli``: the command line (:func:`tabrecon.cli.app.main`)."""

from .app import main

main()
