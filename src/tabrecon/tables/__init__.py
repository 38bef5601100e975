"""Published tables: declared as data over a schema and compiled (:mod:`.spec`), SF1's person
tables and their tabulation (:mod:`.persons`), how a release publishes (:mod:`.publication`,
:mod:`.measures`), the forms it comes in and their readers (:mod:`.published`, :mod:`.forms`,
:mod:`.sf1`, :mod:`.download`, :mod:`.declaration`, :mod:`.layout`) and the identities
between cells (:mod:`.consistency`)."""
