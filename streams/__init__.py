"""Stream processing: the Faust application, its topics and tables, and the local broker harness."""
