"""The live audit: does lbreplay's audit of a ``collect`` recording reproduce what the cluster's leader decided?

Above ``lake`` and ``replay`` (it ingests, validates and replays the recording, then compares): the recorder
(:mod:`lbreplay.collect`) sits below ``lake`` and never imports this package. :mod:`.leader_view` rebuilds the
leader's view from the recorded znode versions, :mod:`.comparison` matches the leader's logged decisions with the
audit's, :mod:`.audit_check` runs the pipeline and explains each difference.
"""
