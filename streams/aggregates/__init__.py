"""Project risk ranking, the master's scheduling view and conversation indicators (issue 4, spec 6.1-6.2, 7, 8).

Pure folds over the engine's thread state and the conversation registry, free of Faust like `streams.engine`:
`routes` fans thread state out to projects and conversations, `risk` folds a project's live threads into its
ranked view, `indicators` folds a conversation's ring marker. Each returns a `Change`: the state to write and the
records to publish. `batch` puts each behind its input topics' decoders, as `streams.topology` runs them.
"""
