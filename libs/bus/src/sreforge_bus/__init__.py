"""A thin typed kit over NATS JetStream (placeholder until the bus lands)."""
