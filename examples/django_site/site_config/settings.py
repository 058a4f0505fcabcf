"""Settings of the Django recipe: a minimal site, its jobs declared in ``TICKWORK``."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "recipe-only-not-a-secret")
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["ticks"]
ROOT_URLCONF = "site_config.urls"
WSGI_APPLICATION = "site_config.wsgi.application"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DJANGO_DB", str(BASE_DIR / "db.sqlite3")),
        "OPTIONS": {"timeout": 20},  # several processes write it: wait for the lock
    }
}
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The durable jobs, run by `python manage.py tickwork` (ticks/management/commands).
# Each entry is a tickwork.stores.JobSpec's fields, with "every" (seconds) or "cron"
# (and "timezone") for its schedule.
TICKWORK = {
    "STATE": os.environ.get("TICKWORK_STATE", str(BASE_DIR / "tickwork.sqlite3")),
    "JOBS": [
        {
            "id": "record-tick",
            "func": "ticks.jobs:record_tick",
            "every": float(os.environ.get("TICKWORK_EVERY", "60")),
            "missed": "all",
        },
        {
            "id": "prune-ticks",
            "func": "ticks.jobs:prune_ticks",
            "cron": "30 3 * * *",
            "timezone": "Europe/Berlin",
            "kwargs": {"keep_days": 7},
        },
    ],
}
