"""Records to publish from: synthetic persons (:mod:`.synth`) and the housing units they live
in (:mod:`.households`). The record containers are the schemas' (:mod:`tabrecon.schema`)."""
