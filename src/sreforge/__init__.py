"""SREForge: the operator CLI and the embedded engine that wires the services together."""
