"""Everything that knows Faust: the app and its worker, the corrections to Faust's commit bookkeeping and record
delivery, the ordered intake and the delivery discipline every agent follows (`agents`), sequencing, progress,
producing and the deadline index. Modules outside this package declare folds and pure batch functions and hand
them to the runtime; they import nothing from Faust."""
