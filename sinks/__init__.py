"""Everything that touches ClickHouse: the client, the schema migrations and (later) the sinks and read models."""
