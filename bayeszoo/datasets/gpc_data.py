"""GP-classification datasets (being written)."""
