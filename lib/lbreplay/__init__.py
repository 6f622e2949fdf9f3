"""lbreplay: replay and what-if analysis of Apache Pulsar broker load balancing on Spark."""

__version__ = "0.1.0"
