"""The WSGI application: ``gunicorn site_config.wsgi`` (it runs no jobs itself)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "site_config.settings")
application = get_wsgi_application()
