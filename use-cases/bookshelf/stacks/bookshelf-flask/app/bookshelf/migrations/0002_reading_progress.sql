-- Reading progress as the e-reader apps sync it: one row per sync, the latest row of a
-- book is where the reader is. Search shows it as `current_page`.
CREATE TABLE reading_progress (
    id        INTEGER PRIMARY KEY,
    book_id   INTEGER NOT NULL REFERENCES books (id) ON DELETE CASCADE,
    logged_at TEXT NOT NULL,
    page      INTEGER NOT NULL,
    device    TEXT
);
-- The latest entry of a book: search reads it for every hit.
CREATE INDEX ix_reading_progress_book ON reading_progress (book_id, logged_at);
