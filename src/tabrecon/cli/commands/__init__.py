"""The command line's commands, one module per pipeline stage; :mod:`tabrecon.cli` assembles
them into ``tabrecon`` and owns the exit-code contract."""
