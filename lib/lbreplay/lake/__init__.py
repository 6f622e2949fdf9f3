"""The lakehouse: input tables, generator, ingest, validation, SQL."""
