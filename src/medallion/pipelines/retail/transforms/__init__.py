"""Retail's pure transformations: events to silver and gold, customer changes and revenue."""
