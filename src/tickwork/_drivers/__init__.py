"""Drivers around the core: the background thread and the asyncio owner task."""
