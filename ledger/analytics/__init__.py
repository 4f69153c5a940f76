"""Analytics, above the workflow: DuckDB `views` over the ledger's files, the columnar
`projection` kept up to date incrementally, and `stats`. Reads the ledger; never writes it."""
