"""The command line: the application and its exit codes (:mod:`.app`), one module of commands
per pipeline stage (:mod:`.commands`) and what they share on the terminal
(:mod:`.terminal`)."""
