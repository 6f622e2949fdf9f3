"""Extensible load manager (PIP-192): BrokerLoadData, TopKBundles, TransferShedder, split strategy."""
