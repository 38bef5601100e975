"""The audit: one run from records or published tables to a report (:mod:`.run`), its
Generate-then-Verify stage for any population (:mod:`.units`), its configuration
(:mod:`.config`), one defense evaluated (:mod:`.evaluate`) and the sweep over defenses
(:mod:`.tradeoff`)."""
