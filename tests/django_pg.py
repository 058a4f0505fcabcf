"""Django in this test process, its default database the given PostgreSQL one.

Django's settings are configured once per process; each call points its default
connection at ``dsn`` (closed first), so tests on different databases can share it.
"""

from __future__ import annotations

from typing import Any


def django_on(dsn: str) -> tuple[Any, Any]:
    """Django's ``connection`` and ``transaction``, the connection now to ``dsn``."""
    import django
    from django.conf import settings
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(dsn)
    database = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": info.get("dbname", ""),
        "USER": info.get("user", ""),
        "PASSWORD": info.get("password", ""),
        "HOST": info.get("host", ""),
        "PORT": info.get("port", ""),
    }
    if not settings.configured:
        settings.configure(DATABASES={"default": database}, USE_TZ=True)
        django.setup()
    from django.db import connection, connections, transaction

    if connection.vendor != "postgresql":  # configured first without it (django_mount.py)
        settings.DATABASES = {"default": database}
        connections._settings = None  # read settings.DATABASES again
        connections.__dict__.pop("settings", None)
        connections.close_all()
        del connections["default"]

    connection.close()
    connection.settings_dict.update(database)
    return connection, transaction
