"""Everything that knows Faust: the app and its worker (`worker.build`), the corrections to Faust's commit bookkeeping
and record delivery, the ordered intake and the delivery discipline every primitive follows (`agents`: keyed folds,
stateless folds, global tables; `sink`), sequencing, the one ledger of what is committed (`progress`), producing and
the deadline index. Two modules here are Faust-free: `protocol`, the interface `streams.topology.wire` declares the
folds against, and `memory`, the in-memory runtime that runs the same declaration for tests and benchmarks. Modules
outside this package declare folds and pure batch functions and hand them to the runtime; they import nothing from
Faust (pyproject.toml's import contracts)."""
