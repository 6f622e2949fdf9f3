"""Reports comparing replay runs."""
