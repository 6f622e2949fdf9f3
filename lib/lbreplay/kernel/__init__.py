"""The pure load-balancing kernel: Pulsar's semantics on columnar (NumPy) arrays, no Spark import.

Every driver (``lbreplay decide``, the Spark replay, the benchmarks) calls these modules.
"""
