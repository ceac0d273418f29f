"""Schema migrations, one SQL file each (applied by `bookshelf.migrate`)."""
