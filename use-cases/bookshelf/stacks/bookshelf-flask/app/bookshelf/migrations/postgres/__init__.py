"""The same schema for PostgreSQL, one SQL file per SQLite migration (`bookshelf.postgres`)."""
