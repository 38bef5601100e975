"""Verified claims, by algorithm: a block alone (:mod:`.block`, Generate-then-Verify), a tract's
blocks coupled by its tract tables (:mod:`.tract`), every block of a release with the runner
(:mod:`.release`), and the claims a certified reconstruction makes, tract by tract
(:mod:`.certified`)."""
