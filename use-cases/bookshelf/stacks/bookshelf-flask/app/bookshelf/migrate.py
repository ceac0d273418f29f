"""Numbered SQL migrations, applied in order at start-up: `python -m bookshelf.migrate`.

Each file `migrations/NNNN_name.sql` runs once per database, in one transaction with its
row in `schema_migrations`. Migrations are forward-only: a migration that has run is
never run again, so changing the schema of a live database means adding a new file, not
editing or deleting one that has shipped.
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources

log = logging.getLogger(__name__)

_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file: its version (the number), name and SQL."""

    version: str
    name: str
    sql: str


def available(package: str = "bookshelf.migrations") -> list[Migration]:
    """The migrations shipped with this build (the SQLite ones unless another `package`
    is named), in version order."""
    found = []
    for entry in resources.files(package).iterdir():
        if not entry.name.endswith(".sql"):
            continue
        version, _, rest = entry.name.removesuffix(".sql").partition("_")
        if not (version.isdigit() and rest):
            raise ValueError(f"migration file {entry.name!r} is not named NNNN_name.sql")
        found.append(Migration(version, rest, entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"two migrations share a version: {versions}")
    return found


def applied(conn: sqlite3.Connection) -> list[str]:
    """Versions already applied to this database, in order."""
    conn.execute(_TABLE)
    return [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply every pending migration in order; return the versions applied now."""
    done = set(applied(conn))
    shipped = available()
    unknown = done - {m.version for m in shipped}
    if unknown:
        log.warning("database has migrations this build does not ship: %s", sorted(unknown))
    ran = []
    for migration in shipped:
        if migration.version in done:
            continue
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        # executescript commits first; the script carries its own transaction, rolled
        # back whole if any statement fails.
        try:
            conn.executescript(
                "BEGIN IMMEDIATE;\n"
                f"{migration.sql}\n;"
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES "
                f"('{migration.version}', '{migration.name}', '{stamp}');\n"
                "COMMIT;"
            )
        except sqlite3.Error:
            conn.rollback()
            raise
        log.info("applied migration %s_%s", migration.version, migration.name)
        ran.append(migration.version)
    return ran


def main(argv: list[str] | None = None) -> None:
    """Command line entry point: migrate the database at --db, print what ran."""
    from .db import connect

    parser = argparse.ArgumentParser(prog="python -m bookshelf.migrate", description=__doc__)
    parser.add_argument("--db", required=True, help="SQLite file to migrate")
    args = parser.parse_args(argv)
    conn = connect(args.db)
    try:
        ran = migrate(conn)
    finally:
        conn.close()
    print(f"applied {len(ran)} migration(s): {', '.join(ran) or 'none pending'}")


if __name__ == "__main__":
    main()
