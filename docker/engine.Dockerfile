# The engine's services for compose.yaml: Debian's Python 3.11 and git on local/bookworm, and the
# lockfile's third-party packages installed offline from wheels that scripts/compose-context
# downloaded on the host (HTTPS from inside a build fails here; an offline build is pinned anyway).
# bubblewrap, Prometheus and Alertmanager are for the deployer and runner containers: a run's stack,
# its CI and its agent run there as local processes, agent code under bubblewrap, as on a host.
# The checkout itself is bind-mounted at run time at its host path (PYTHONPATH below): services
# find use-cases/ and agents/ relative to their own source, and paths in events match the host's.
FROM local/bookworm
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        python3 python3-venv git ca-certificates \
        bubblewrap prometheus prometheus-alertmanager >/dev/null \
    && rm -rf /var/lib/apt/lists/*
COPY .sreforge/compose/requirements.txt .sreforge/compose/wheels/ /tmp/wheels/
RUN python3 -m venv /opt/sreforge \
    && /opt/sreforge/bin/pip install -q --no-index --find-links /tmp/wheels \
        -r /tmp/wheels/requirements.txt \
    && rm -rf /tmp/wheels
ENV PATH=/opt/sreforge/bin:$PATH PYTHONDONTWRITEBYTECODE=1
COPY docker/ready.py /usr/local/lib/sreforge-ready.py
ENTRYPOINT ["python3", "-m", "sreforge"]
