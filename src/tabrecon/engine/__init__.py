"""The engine, written once over any schema and knowing none: the count model of a
release's tables (:mod:`.reconstruct`), the solvers behind it (:mod:`.solvers`) and how far
its solutions can differ (:mod:`.variability`)."""
