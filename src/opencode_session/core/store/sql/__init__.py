"""The store's SQL, one module per concern, written once for every SQL backend: SQLite's dialect with `?` parameters,
constant-path `json_extract` and `rowid` as the commit-ordered position (PostgreSQL's backend translates those)."""
