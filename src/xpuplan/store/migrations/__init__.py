"""Alembic migrations of the store (run through ``xpuplan db upgrade`` or ``open_store``)."""
