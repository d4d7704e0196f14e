"""Serving: the graph behind the SavedModel's signatures, n-gram tables in it, and the export."""
