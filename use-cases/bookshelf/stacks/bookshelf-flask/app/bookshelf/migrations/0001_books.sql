-- The library: one row per book on the shelf. title_key/author_key are lower-cased
-- copies of title/author; their indexes serve the sorted listing and the title search.
CREATE TABLE IF NOT EXISTS books (
    id             INTEGER PRIMARY KEY,
    isbn           TEXT NOT NULL UNIQUE,
    title          TEXT NOT NULL,
    title_key      TEXT NOT NULL,
    author         TEXT NOT NULL,
    author_key     TEXT NOT NULL,
    published_year INTEGER,
    pages          INTEGER,
    status         TEXT NOT NULL DEFAULT 'want',
    rating         INTEGER,
    added_at       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_books_title_key ON books (title_key);
CREATE INDEX IF NOT EXISTS ix_books_author_key ON books (author_key, title_key);
CREATE INDEX IF NOT EXISTS ix_books_added_at ON books (added_at);
