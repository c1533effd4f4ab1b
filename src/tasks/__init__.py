"""Registered tasks (see src/registry.py); every module here registers its entries on import."""
