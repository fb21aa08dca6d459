"""The `ctxbudget` command line (cli.py), one entry for a worker's base install and for the pipeline."""
