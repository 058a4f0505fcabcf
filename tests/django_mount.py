"""A Django site made in the test process: its settings (once) and the URLs a test mounts.

`configure` sets Django up with this module as the URL conf; a test puts its patterns
in `urlpatterns` (tests/test_web.py, tests/test_web_browser.py).
"""

from __future__ import annotations

from typing import Any

urlpatterns: list[Any] = []


def configure(*patterns: Any) -> None:
    """Set Django up (once per process) and serve ``patterns``."""
    import django
    from django.conf import settings
    from django.urls import clear_url_caches

    site = {
        "ALLOWED_HOSTS": ["testserver", "127.0.0.1", "localhost"],
        "ROOT_URLCONF": __name__,
        "MIDDLEWARE": ["django.middleware.csrf.CsrfViewMiddleware"],
        "SECRET_KEY": "test-only",
    }
    if not settings.configured:
        settings.configure(**site, DATABASES={}, INSTALLED_APPS=[])
        django.setup()
    else:  # configured first by another test of this process (tests/django_pg.py)
        for name, value in site.items():
            setattr(settings, name, value)
    urlpatterns[:] = patterns
    clear_url_caches()
