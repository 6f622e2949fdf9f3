"""Replay engine: closed-loop what-if and audit replays of Pulsar load balancing."""
