"""``lbreplay collect``: record a live Pulsar cluster's load-balancing state into the dump layout ``ingest`` reads.

Pulsar keeps only the latest load report per broker; the leader acts on whichever version it holds at each
shedding time. The collector therefore watches the metadata store (every version of
``/loadbalance/brokers/<broker>``, ``/loadbalance/bundle-data/...`` and ``/loadbalance/broker-time-average/...``,
each written to its own file named by the znode's mtime and version) and polls the admin API every
``--interval`` (load reports, per-topic stats per bundle, namespaces' bundles and policies, isolation policies,
the current leader). See :mod:`lbreplay.collect.layout` for the files.
"""
