# Gunicorn settings for bookshelf. One process with a thread pool: requests
# mostly wait on SQLite or the metadata service, and a single process keeps the
# in-process metadata cache and the Prometheus registry whole.
import os

bind = f"127.0.0.1:{os.environ.get('BOOKSHELF_PORT', '8000')}"
workers = 1
worker_class = "gthread"
threads = int(os.environ.get("BOOKSHELF_THREADS", "64"))
backlog = 2048
timeout = 30
graceful_timeout = 5
keepalive = 5
accesslog = None
errorlog = "-"
loglevel = "info"
# The admin socket defaults to one per-user path that every instance on a host
# would fight over; nothing here uses it.
control_socket_disable = True
