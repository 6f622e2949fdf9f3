"""``lbreplay collect``: record a live Pulsar cluster's load-balancing state into the dump layout ``ingest`` reads.

Pulsar keeps only the latest load report per broker; the leader acts on whichever version it holds at each
shedding time. The collector therefore watches the metadata store (every version of
``/loadbalance/brokers/<broker>``, ``/loadbalance/bundle-data/...`` and ``/loadbalance/broker-time-average/...``,
each written to its own file named by the znode's mtime and version) and polls the admin API every
``--interval`` (load reports, per-topic stats per bundle, namespaces' bundles and policies, isolation policies,
the current leader); with ``--leader-log-dir`` it follows the brokers' logs for the leader's lines
(:mod:`.leader_log_files`). See :mod:`lbreplay.collect.layout` for the files.

First contact: every target is tried (bounded retries, :mod:`.reachability`) before anything is written, and an
unreachable one is exit 3 naming it; ``--check`` (:mod:`.first_contact`) only lists what would be recorded and
what is missing. A session that recorded nothing at all exits 3 too.

This package is the recorder, the bottom of the data path: ``lake`` reads its layout and its leader-log parsing
(:mod:`.leader_log`), and it imports neither ``lake`` nor ``replay`` (``lbreplay.devtools.imports`` checks it).
The live audit that compares a recording's audit with the leader's decisions is :mod:`lbreplay.live_audit`.
"""
