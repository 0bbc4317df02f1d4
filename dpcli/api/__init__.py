"""dpcli as a library: every spending command as a function, and the object that owns a spend.

``dpcli.api.spend.Spend`` is the only door to private data: built from the
spec, the plan and the source, it runs the pre-checks, reserves the plan in
the ledger, holds the noise generator, and is the only way to read the data
(:meth:`~dpcli.api.spend.Charged.statistics`, :meth:`~dpcli.api.spend.Charged.passes`)
or release a result. Each command module (``train_nb`` …) is plain Python:
parse nothing, print nothing; :class:`dpcli.Session` wraps them for notebooks
and the CLI renders what they return.
"""
