"""``manage.py tickwork``."""
